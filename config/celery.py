"""Celery app. The broker is a setting: filesystem transport by default (no service needed),
Redis or RabbitMQ by URL."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_configure.connect
def _configure_filesystem_transport(sender, **kwargs):
    from django.conf import settings

    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        base = settings.CELERY_BROKER_DIR
        folders = {"data_folder_in": base / "queue", "data_folder_out": base / "queue",
                   "processed_folder": base / "processed", "control_folder": base / "control"}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        sender.conf.broker_transport_options = {k: str(v) for k, v in folders.items()} | {
            "store_processed": False}


app.autodiscover_tasks()
import ops.celery_signals  # noqa: E402,F401  (issue 13: JSON logs with run/step ids, task metrics)
