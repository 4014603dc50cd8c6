from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations: webhooks, event feed, idempotency"

    def ready(self):
        # Explicitly, not with Django signals: every audit event recorded in a transaction is
        # offered to integrations.events.capture in that same transaction (ADR 0009).
        from audit import hooks
        from core import idempotency as api_idempotency
        from integrations import events, idempotency, tasks
        from integrations.catalogue import event_type_for
        from integrations.events import capture, capture_many

        hooks.register_after_record(capture, interested_in=lambda action: event_type_for(action) is not None,
                                     many=capture_many)
        # The API base view (core) keeps its Idempotency-Key records in this app's table.
        api_idempotency.IDEMPOTENCY.fill(api_idempotency.Idempotency(
            begin=idempotency.idempotency_begin, complete=idempotency.idempotency_complete,
            abandon=idempotency.idempotency_abandon))
        # Deliveries are handed to Celery after commit (events.kick_deliveries); the task module
        # imports events, so events gets the task from here.
        events.DELIVERY_TASK.fill(tasks.webhook_deliver_task)
