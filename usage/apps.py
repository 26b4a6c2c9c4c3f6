from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage and budgets"

    def ready(self) -> None:
        from cloudpivot.accounts.quotas import register_admission_hold
        from usage.budgets import budget_holds

        # A project over its budget with a hard stop holds new admissions (tasks.services.admission asks).
        register_admission_hold(budget_holds)
