from django.apps import AppConfig


class RunnerApiConfig(AppConfig):
    name = "runner_api"
    verbose_name = "Runner API"
