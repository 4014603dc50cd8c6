from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from ops import health, metrics  # noqa: F401  (readiness checks; every metric registered at start)
        from ops.security import on_user_locked_out

        user_locked_out.connect(on_user_locked_out, dispatch_uid="ops.audit_lockout")
