from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from ops import celery_signals
        from runs import observability

        celery_signals.register_run_lookup(observability.run_ids)
        celery_signals.register_run_step_observer(observability.observe_run_step)
