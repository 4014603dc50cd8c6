"""Thin Celery tasks of the offline analyst (STYLE: tasks take plain values and call the service).

classifier_train_task trains the classifier outside any run step: a step that finds no trained
artifact asks for it (analyst.classifier.classifier_train_request) and is retried. Training takes
a minute or more under load, so this task has limits of its own, far above a step's. It may run
twice (at-least-once delivery, or two requests): classifier_train's file lock admits one trainer
and the other finds the artifact and does nothing."""

from __future__ import annotations

from pathlib import Path

from celery import shared_task

from analyst.classifier import (
    TRAIN_TASK_SOFT_TIME_LIMIT,
    TRAIN_TASK_TIME_LIMIT,
    artifact_for,
    classifier_train,
)
from analyst.examples import DATA_FILE


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=TRAIN_TASK_SOFT_TIME_LIMIT,
             time_limit=TRAIN_TASK_TIME_LIMIT)
def classifier_train_task(self, data_file: str | None = None) -> bool:
    """Train the classifier of `data_file` (the shipped sample by default) unless its artifact exists.
    Returns whether it trained."""
    path = Path(data_file) if data_file else DATA_FILE
    try:
        return classifier_train(path).trained
    finally:
        # Whatever happened, this request is over: a step that still finds no artifact asks again.
        artifact_for(path).request_path.unlink(missing_ok=True)
