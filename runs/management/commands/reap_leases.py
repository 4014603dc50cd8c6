"""manage.py reap_leases: re-enqueue runs whose worker died or whose next step was lost (what the
beat task reap_expired_leases_task does every ARBITER_REAP_INTERVAL_SECONDS)."""


from core.commands import DatabaseCommand
from runs.executor import lease_reap_expired


class Command(DatabaseCommand):
    help = "Re-enqueue runs with an expired lease, and queued runs that may start."

    def handle(self, *args, **options):
        kicked = lease_reap_expired()
        self.stdout.write(f"Re-enqueued {len(kicked)} run(s)" + (f": {', '.join(f'R{i}' for i in kicked)}."
                                                                  if kicked else "."))
