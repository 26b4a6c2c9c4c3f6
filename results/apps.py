from django.apps import AppConfig


class ResultsConfig(AppConfig):
    name = "results"
    verbose_name = "Results"

    def ready(self) -> None:
        from results.services import outputs_record
        from results.stores import store_target
        from tasks.services.runner_reports import register_outputs

        # The assignment names where declared outputs go, and the `outputs` event is recorded here (tasks
        # cannot import this app: a registry, docs/architecture.md).
        register_outputs(target=store_target, record=outputs_record)
