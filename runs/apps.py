from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Agent runs"

    def ready(self) -> None:
        from ops import celery_signals
        from runs import observability, run_events, tasks

        celery_signals.register_run_lookup(observability.run_ids)
        celery_signals.register_run_step_observer(observability.observe_run_step)
        # Looked up on runs.tasks at each call, not bound once: tests replace runs.tasks.enqueue_step
        # to observe the steps sent.
        run_events.STEP_SENDER.fill(lambda run_id, **options: tasks.enqueue_step(run_id, **options))
