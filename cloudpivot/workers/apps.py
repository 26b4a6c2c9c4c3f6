from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Listed before django_q in INSTALLED_APPS, so that its `qcluster` command is the one manage.py runs."""

    name = "cloudpivot.workers"
    label = "workers"
    verbose_name = "Workers"
