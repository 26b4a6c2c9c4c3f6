from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from cloudpivot import db_fork

        # qcluster forks its workers: none may speak on its parent's PostgreSQL sockets.
        db_fork.install()
        from cloudpivot.accounts.quotas import register_usage
        from tasks import receivers
        from tasks.selectors import task_quota_usage

        # Tasks and instances share a project's vCPU and memory limits (accounts.quotas.shared_usage).
        register_usage("tasks", task_quota_usage)

        from tasks.dispatch import tick_on_worker_spawn

        # A project whose grant on a connection is removed has its tasks there stopped.
        receivers.connect()

        # A fresh worker starts the ticker at once instead of waiting for the minute schedule.
        post_spawn.connect(tick_on_worker_spawn, dispatch_uid="cloudpivot-ticker-on-spawn")
