from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
    verbose_name = "Outbox and workers"

    def ready(self) -> None:
        from ops.health import (
            READINESS_BEAT_HEARTBEAT,
            READINESS_OUTBOX_LAG,
            READINESS_WORKER_HEARTBEAT,
            register_readiness_check,
        )
        from outbox.health import check_beat_heartbeat, check_outbox_lag, check_worker_heartbeat

        register_readiness_check(READINESS_WORKER_HEARTBEAT, check_worker_heartbeat)
        register_readiness_check(READINESS_OUTBOX_LAG, check_outbox_lag)
        register_readiness_check(READINESS_BEAT_HEARTBEAT, check_beat_heartbeat, degrades=True)
