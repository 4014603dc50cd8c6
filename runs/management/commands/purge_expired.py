"""manage.py purge_expired [--dry-run]

Purges what the retention settings say has expired (runs.retention: intermediate checkpoints of
finished runs, model-call contents, expired memory), tenant by tenant, and prints what it purged per
tenant. Each tenant's purge writes one `runs.retention.purged` audit event with its counts. Beat
runs the same function daily (runs.tasks.retention_purge_task). Exits 1 if a tenant's purge failed
(it was rolled back; the log says why)."""

from django.conf import settings
from django.utils import timezone

from core.commands import DatabaseCommand
from runs.retention import Cutoffs, has_purged, retention_purge


def describe(counts: dict[str, int]) -> str:
    parts = []
    if counts["checkpoints"]:
        part = f"{counts['checkpoints']} checkpoint(s) of {counts['runs']} finished run(s)"
        if counts["snapshots_written"]:
            part += f" ({counts['snapshots_written']} kept checkpoint(s) given a full snapshot)"
        parts.append(part)
    if counts["model_calls"]:
        parts.append(f"the content of {counts['model_calls']} model call(s)")
    if counts["memory_records"]:
        parts.append(f"{counts['memory_records']} memory record(s)")
    return ", ".join(parts)


class Command(DatabaseCommand):
    help = "Purge expired checkpoints, model-call contexts and memory; audit events are never purged."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true",
                            help="Only count what would be purged; change nothing.")

    def handle(self, *args, **options):
        dry_run = options["dry_run"]
        days = (f"retention: checkpoints {settings.ARBITER_RETENTION_CHECKPOINT_DAYS} days, model-call contexts "
                f"{settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS} days, memory {settings.ARBITER_RETENTION_MEMORY_DAYS}"
                f" days; 0 = keep forever")
        if Cutoffs.at(timezone.now()).is_off:
            self.stdout.write("Retention is off (every ARBITER_RETENTION_*_DAYS is 0, keep forever): nothing is purged.")
            return
        verb = "would purge" if dry_run else "purged"

        def report(tenant, counts):
            if counts is None:
                self.stdout.write(f"{tenant.slug}: FAILED, rolled back (see the log); retried next time.")
            elif has_purged(counts):
                self.stdout.write(f"{tenant.slug}: {verb} {describe(counts)}.")
            else:
                self.stdout.write(f"{tenant.slug}: nothing expired.")
            if counts and counts["runs_skipped"]:
                self.stdout.write(f"{tenant.slug}: {counts['runs_skipped']} run(s) kept whole: their checkpoints "
                                  f"do not replay to their recorded states (see the log).")

        totals = retention_purge(dry_run=dry_run, on_tenant=report)
        summary = describe(totals) or "nothing"
        self.stdout.write(f"{'Dry run: would purge' if dry_run else 'Purged'} {summary} "
                          f"in {totals['tenants']} tenant(s) ({days}).")
        if totals["tenants_failed"]:
            self.stderr.write(f"{totals['tenants_failed']} tenant(s) failed; see the log.")
            raise SystemExit(1)
