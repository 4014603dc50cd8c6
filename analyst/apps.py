from django.apps import AppConfig


class AnalystConfig(AppConfig):
    name = "analyst"
    verbose_name = "Offline analyst"

    def ready(self) -> None:
        from analyst import classifier, tasks

        # A step that finds no trained classifier asks a worker to train it (the task module
        # imports the classifier, so the classifier gets the task from here).
        classifier.TRAIN_TASK.fill(tasks.classifier_train_task)
