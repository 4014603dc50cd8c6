from django.apps import AppConfig


class AnalystConfig(AppConfig):
    name = "analyst"
    verbose_name = "Offline analyst"
