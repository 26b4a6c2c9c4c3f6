from django.apps import AppConfig


class ResultsConfig(AppConfig):
    name = "results"
    verbose_name = "Results"

    def ready(self) -> None:
        from results.services import outputs_record, storage_begin, storage_end
        from results.stores import store_target
        from tasks.services.runner_reports import register_outputs
        from tasks.services.storage_record import register_storage_record

        # The assignment names where declared outputs go, and the `outputs` event is recorded here (tasks
        # cannot import this app: a registry, docs/architecture.md).
        register_outputs(target=store_target, record=outputs_record)
        # What each attempt borrowed or created (its task's `data`), recorded when it starts and ends.
        register_storage_record(begin=storage_begin, end=storage_end)
