from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cloudpivot.accounts"
    label = "accounts"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from cloudpivot.accounts import schema  # noqa: F401 - registers the OpenAPI auth extension
