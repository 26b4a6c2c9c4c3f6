from django.apps import AppConfig


class OrphansConfig(AppConfig):
    name = "orphans"
    verbose_name = "Orphans"
