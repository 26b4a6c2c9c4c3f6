from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Event feed and webhooks"

    def ready(self) -> None:
        from notifications import capture
        from tasksets.services.lifecycle import taskset_announced

        capture.connect()
        # Task sets sit beside the feed (both layer 4): their one writer's signal is connected here, at the top.
        taskset_announced.connect(capture.taskset_announced, dispatch_uid="notifications.taskset")
