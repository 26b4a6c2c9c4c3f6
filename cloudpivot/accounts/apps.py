from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cloudpivot.accounts"
    label = "accounts"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from cloudpivot.accounts import (  # noqa: F401 - registration on import
            checks,  # system checks for the login settings
            group_sync,  # the OIDC group map, applied on every provider login
            schema,  # the OpenAPI auth extension
        )
