"""Celery app. The broker is a setting: filesystem transport by default (no service needed),
Redis or RabbitMQ by URL."""

import logging
import os
import uuid
import warnings
from time import monotonic

from celery import Celery, bootsteps
from celery.exceptions import CPendingDeprecationWarning
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown
from celery.worker import state as worker_state
from kombu.exceptions import ChannelError
from kombu.transport.filesystem import Channel as FilesystemChannel
from kombu.transport.filesystem import Transport as FilesystemTransport
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")


class AtomicFilesystemChannel(FilesystemChannel):
    """kombu's filesystem channel creates a message's file and then writes it, while a worker
    polling the folder moves and reads any file whose name ends in `.<queue>.msg`: between the two
    it read an empty file, failed on JSONDecodeError and the worker exited (seen under load: `make
    run` stopped). Here the message is written under a name the channel never reads (a leading dot,
    `.tmp` at the end) and renamed into place: a rename within one folder is atomic, so a reader
    finds the whole message or no file."""

    def _put(self, queue, payload, **kwargs):
        filename = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, filename)
        partial = os.path.join(self.data_folder_out, f".{filename}.tmp")
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class QuickStopFilesystemTransport(FilesystemTransport):
    """The filesystem broker has no event loop, so celery drives it with a blocking loop that
    drains for 2 s at a time and runs one more drain after a warm shutdown was asked for: an idle
    worker took 5-8 s to stop. This drain waits in slices of a quarter second and gives up as soon
    as the worker is asked to stop, so an idle worker stops within about a second. Its channel
    writes each message atomically (AtomicFilesystemChannel)."""

    Channel = AtomicFilesystemChannel

    def drain_events(self, connection, timeout=None):
        if timeout is None:
            return super().drain_events(connection)
        deadline = monotonic() + timeout
        while True:
            try:
                return super().drain_events(connection, timeout=min(0.25, max(deadline - monotonic(), 0.01)))
            except TimeoutError:  # socket.timeout: a drain that found nothing
                # The flags hold an exit code once set (0 for a warm shutdown, and 0 == False):
                # compare by identity, as celery's own maybe_shutdown does.
                asked = any(flag is not None and flag is not False
                            for flag in (worker_state.should_stop, worker_state.should_terminate))
                if asked or monotonic() >= deadline:
                    raise


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
            "store_processed": False, "polling_interval": 0.2}
        sender.conf.broker_transport = "config.celery:QuickStopFilesystemTransport"


app.autodiscover_tasks()
import ops.celery_signals  # noqa: E402,F401  (JSON logs with run/step ids, task metrics)
from core.outages import BrokerConnectionLogFilter, OutageLogFilter  # noqa: E402

# A periodic task failing on a database or broker outage: one warning per outage, not a traceback
# per attempt (installed before the pool forks, so its processes inherit it).
logging.getLogger("celery.app.trace").addFilter(OutageLogFilter())
# The consumer losing the broker: one warning when it starts, one line with the count of failed
# reconnects when the consumer is connected again (BrokerReconnected, below), not an ERROR per attempt.
BROKER_CONNECTION_LOG = BrokerConnectionLogFilter()
logging.getLogger("celery.worker.consumer.consumer").addFilter(BROKER_CONNECTION_LOG)


class BrokerReconnected(bootsteps.StartStopStep):
    """A consumer step started after the broker connection (Celery restarts the consumer's steps
    after each reconnect): the end of a broker outage, for BROKER_CONNECTION_LOG."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, consumer):
        BROKER_CONNECTION_LOG.connected()


app.steps["consumer"].add(BrokerReconnected)


@celeryd_after_setup.connect
def _quiet_the_connection_loss_default_warning(sender=None, **kwargs):
    """Celery warns on every broker outage, whatever the setting's value, that the default of
    CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS will change; it is set on purpose
    (config/settings/celery.py). Installed after Celery's logging set-up, which asks to see every
    CPendingDeprecationWarning."""
    warnings.filterwarnings("ignore", message=r"\s*In Celery 5.1 we introduced an optional breaking change",
                            category=CPendingDeprecationWarning)

# --- Worker start-up and heartbeat (outbox/heartbeat.py) -------------------------------
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
    thread.stop(timeout=2)  # let a tick in progress finish, so nothing writes after the stop below
    try:
        from outbox.services import worker_heartbeat_stopped

        worker_heartbeat_stopped(name=thread.worker_name)
    except Exception:  # the database may be the reason we stop; a stale heartbeat expires by itself
        logging.getLogger(__name__).warning("worker %s: could not record its stop", thread.worker_name)
