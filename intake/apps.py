from django.apps import AppConfig


class IntakeConfig(AppConfig):
    name = "intake"
    verbose_name = "Intake: complaints brought in from outside, in bulk and by e-mail"
