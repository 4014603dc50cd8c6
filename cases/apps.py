from django.apps import AppConfig


class CasesConfig(AppConfig):
    name = "cases"
    verbose_name = "Cases"

    def ready(self):
        # A provider's delivery webhook (django-anymail's tracking signal) settles a
        # notice whose delivery is unknown (cases/delivery_tracking.py).
        from anymail.signals import tracking

        from cases.delivery_tracking import settle_from_tracking_event

        tracking.connect(settle_from_tracking_event, dispatch_uid="arbiter-notice-settle-from-tracking")
