from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cloudpivot.accounts"
    label = "accounts"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_save

        from cloudpivot.accounts import (  # noqa: F401 - registration on import
            checks,  # system checks for the login settings
            group_sync,  # the OIDC group map, applied on every provider login
            schema,  # the OpenAPI auth extension
        )
        from cloudpivot.accounts.authentication import token_cache_clear
        from cloudpivot.accounts.models import ApiToken, Quota
        from cloudpivot.recent import recent_clear

        for model in (ApiToken, get_user_model()):  # a revoked token, a deactivated user: refused at once here
            post_save.connect(token_cache_clear, sender=model, dispatch_uid=f"token-cache-{model._meta.label}")
            post_delete.connect(token_cache_clear, sender=model, dispatch_uid=f"token-cache-del-{model._meta.label}")
        # A project's quotas kept for a submit (cloudpivot/recent.py) are forgotten when one changes.
        post_save.connect(recent_clear, sender=Quota, dispatch_uid="recent-quota")
        post_delete.connect(recent_clear, sender=Quota, dispatch_uid="recent-quota-del")
