from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cloudpivot.accounts"
    label = "accounts"
    verbose_name = "Projects and access"
