"""Celery app. The broker is a setting: filesystem transport by default (no service needed),
Redis or RabbitMQ by URL."""

import logging
import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

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
from core.outages import OutageLogFilter  # noqa: E402

# A periodic task failing on a database or broker outage: one warning per outage, not a traceback
# per attempt (installed before the pool forks, so its processes inherit it).
logging.getLogger("celery.app.trace").addFilter(OutageLogFilter())

# --- Worker start-up and heartbeat (issue 12, outbox/heartbeat.py) -------------------------------
# On start-up a worker records its heartbeat and relays whatever the outbox holds (work committed
# while no worker or broker was up), then a daemon thread in the worker's main process repeats
# both every ARBITER_WORKER_HEARTBEAT_SECONDS — independently of beat.
_heartbeat = {}


@worker_ready.connect
def _worker_started(sender=None, **kwargs):
    from outbox.heartbeat import WorkerHeartbeatThread

    name = getattr(sender, "hostname", None) or f"worker@{os.getpid()}"
    thread = WorkerHeartbeatThread(name)
    thread.tick(starting=True)
    thread.start()
    _heartbeat["thread"] = thread
    logging.getLogger(__name__).info("worker %s: heartbeat and outbox relay started", name)


@worker_shutdown.connect
def _worker_stopping(sender=None, **kwargs):
    thread = _heartbeat.pop("thread", None)
    if thread is None:
        return
    thread.stop()
    try:
        from outbox.services import worker_heartbeat_stopped

        worker_heartbeat_stopped(name=thread.worker_name)
    except Exception:  # the database may be the reason we stop; a stale heartbeat expires by itself
        logging.getLogger(__name__).warning("worker %s: could not record its stop", thread.worker_name)
