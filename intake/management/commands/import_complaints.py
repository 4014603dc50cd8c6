"""`manage.py import_complaints FILE.csv --tenant SLUG [--dry-run]`: bring a CFPB complaint export
into a tenant, with a progress bar, or (--dry-run) say what it would do and write nothing."""

from __future__ import annotations

import time

from django.core.management.base import CommandError

from accounts.models import Tenant
from core.actors import Actor
from core.commands import DatabaseCommand
from core.errors import DomainError
from intake.models import ComplaintImport
from intake.services import (
    complaint_import_check,
    complaint_import_claim,
    complaint_import_run,
    complaint_import_start,
    file_check,
)

ACTOR_NAME = "import_complaints"
BAR_WIDTH = 30


class Command(DatabaseCommand):
    help = ("Import a CFPB complaint export (CSV) into a tenant: one case per complaint, with its events, audit "
            "records and due dates. Complaints imported before are skipped. --dry-run writes nothing.")

    def add_arguments(self, parser):
        parser.add_argument("file", help="the CSV file, in the CFPB portal's export format")
        parser.add_argument("--tenant", required=True, help="the tenant's slug")
        parser.add_argument("--dry-run", action="store_true", help="check the file and count, write nothing")
        parser.add_argument("--errors", default="", help="where to write the report of bad rows "
                                                         "(default: FILE with .errors.csv)")

    def handle(self, *args, file: str, tenant: str, dry_run: bool, errors: str, **options):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"There is no tenant {tenant!r}. Known: {', '.join(Tenant.objects.values_list('slug', flat=True))}.")
        try:
            if dry_run:
                self._dry_run(found, file)
                return
            complaint_import = complaint_import_start(actor=Actor.system(ACTOR_NAME), tenant=found, path=file,
                                                      enqueue=False)
        except FileNotFoundError:
            raise CommandError(f"There is no file {file}.") from None
        except DomainError as error:
            raise CommandError(error.message) from None
        self._run(complaint_import, file, errors or _errors_path(file))

    def _dry_run(self, tenant: Tenant, path: str) -> None:
        with open(path, "rb") as handle:
            file_check(handle, filename=path)
            outcome = complaint_import_check(tenant=tenant, handle=handle)
        self._say_unknown(outcome.unknown_columns)
        for bad in outcome.error_rows:
            self.stdout.write(f"  row {bad.row}: {bad.problem}")
        self.stdout.write(self.style.SUCCESS(
            f"Dry run, nothing written: {outcome.rows} rows; {outcome.created} would open a case, "
            f"{outcome.duplicates} already imported, {outcome.errors} bad."))

    def _run(self, complaint_import: ComplaintImport, path: str, errors_path: str) -> None:
        claimed = complaint_import_claim(import_id=complaint_import.pk)
        started = time.monotonic()
        with open(path, "rb") as handle:
            done = complaint_import_run(complaint_import=claimed, handle=handle,
                                        on_progress=lambda current: self._bar(current, started))
        self.stderr.write("")
        self._say_unknown(tuple(done.unknown_columns))
        if done.error_count and done.error_report:
            with done.error_report.open("rb") as report, open(errors_path, "wb") as out:
                for chunk in report.chunks():
                    out.write(chunk)
            self.stdout.write(f"  {done.error_count} bad rows, each with its problem, written to {errors_path}")
        seconds = time.monotonic() - started
        if done.created_count == 0 and done.duplicate_count:
            self.stdout.write(f"  Nothing new: all {done.duplicate_count} complaints were already imported.")
        self.stdout.write(self.style.SUCCESS(
            f"Imported {done.filename}: {done.rows_read} rows in {seconds:.1f} s; {done.created_count} cases opened, "
            f"{done.duplicate_count} already imported, {done.error_count} bad rows."))

    def _bar(self, current: ComplaintImport, started: float) -> None:
        filled = int(BAR_WIDTH * current.percent / 100)
        elapsed = max(time.monotonic() - started, 1e-6)
        self.stderr.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {current.percent:3d}%  "
                         f"{current.rows_read:,} rows, {current.created_count:,} opened, "
                         f"{current.rows_read / elapsed:,.0f} rows/s ", ending="")
        self.stderr.flush()

    def _say_unknown(self, unknown: tuple[str, ...]) -> None:
        if unknown:
            self.stdout.write(f"  Columns ignored (not in the CFPB export format): {', '.join(unknown)}")


def _errors_path(path: str) -> str:
    return (path[:-4] if path.lower().endswith(".csv") else path) + ".errors.csv"
