from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from ops import health  # noqa: F401  (registers the database and broker readiness checks)
        from ops.security import on_user_locked_out

        user_locked_out.connect(on_user_locked_out, dispatch_uid="ops.audit_lockout")
