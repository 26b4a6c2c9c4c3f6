from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Event feed and webhooks"

    def ready(self) -> None:
        from notifications import capture

        capture.connect()
