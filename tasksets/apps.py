from django.apps import AppConfig


class TasksetsConfig(AppConfig):
    name = "tasksets"
    verbose_name = "Task sets"

    def ready(self) -> None:
        from tasks.services.reconcile import register_pass_step
        from tasksets import receivers
        from tasksets.services.materialize import sets_due, sets_materialize

        # The reconcile pass materializes elements as room frees (tasks cannot import this app: a registry).
        register_pass_step("set_elements", step=sets_materialize, due=sets_due)
        # A finished element may make room for the next: the pass is woken at once, not at its next look.
        receivers.connect()
