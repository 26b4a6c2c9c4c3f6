from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from tasks import receivers
        from tasks.dispatch import tick_on_worker_spawn

        # A project whose grant on a connection is removed has its tasks there stopped.
        receivers.connect()

        # A fresh worker starts the ticker at once instead of waiting for the minute schedule.
        post_spawn.connect(tick_on_worker_spawn, dispatch_uid="cloudpivot-ticker-on-spawn")
