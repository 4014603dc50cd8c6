"""The writes of bulk intake: starting an import, running it chunk by chunk, finishing it.

An import streams its file: rows are read, checked and written `INTAKE_CHUNK_ROWS` at a time, each
chunk in one transaction that claims its complaint ids (the unique (tenant, complaint id) of
ImportedComplaint, INSERT ... ON CONFLICT DO NOTHING: a complaint already claimed is "already
imported" and opens nothing), opens the new cases through cases.services.bulk.case_create_many and
records the progress. A bad row is written to the error report and changes nothing. Memory does not
grow with the file: one chunk of rows is held at a time, and the error report goes to disk."""

from __future__ import annotations

import csv
import io
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.files import File
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record
from cases import policy
from cases.models import Case
from cases.services import evidence_add
from cases.services.bulk import NewCase, case_create_many
from core.actors import Actor, coerce_actor
from core.db import retry_on_deadlock
from core.errors import DomainError, Forbidden, Invalid, NotFound
from intake import cfpb, mail
from intake.models import ComplaintImport, ImportedComplaint, ImportStatus, InboundMessage, InboundStatus
from outbox.services import outbox_enqueue

logger = logging.getLogger(__name__)

CAN_IMPORT = frozenset({policy.SUPERVISOR})
# A running import whose last chunk is older than this lost its worker: a redelivered task resumes it.
STALLED_AFTER = timedelta(minutes=5)
ERROR_REPORT_COLUMNS = ("Row", "Complaint ID", "Problem")


@dataclass
class Outcome:
    """The counts of one pass over a file (an import, or a dry run)."""

    rows: int = 0
    created: int = 0
    duplicates: int = 0
    errors: int = 0
    unknown_columns: tuple[str, ...] = ()
    error_rows: list[cfpb.BadRow] = field(default_factory=list)  # dry run only, the first few


def _check_actor(actor: Actor, tenant: Tenant) -> None:
    """A supervisor of the tenant, or the system (an operator at the command line)."""
    if actor.kind == Actor.SYSTEM:
        return
    if actor.is_agent or not actor.is_user:
        raise Forbidden("Only a supervisor can import complaints.")
    if actor.user.tenant_id != tenant.pk:
        raise NotFound("Not found in your organisation; check the reference or link you used.")
    if actor.role not in CAN_IMPORT:
        raise Forbidden(f"Your role ({actor.role}) cannot import complaints; a supervisor can.")


def file_check(handle, *, filename: str) -> cfpb.Header:
    """The checks made before an import exists: a .csv name, UTF-8 text within the size limit, a
    header with the required columns. Invalid (with the reason in plain words) otherwise."""
    if not filename.lower().endswith(".csv"):
        message = "Only CSV files can be imported: choose the .csv file exported from the CFPB portal."
        raise Invalid(message, fields={"file": [message]})
    try:
        return cfpb.check_file(handle, max_bytes=settings.INTAKE_MAX_UPLOAD_BYTES)
    except cfpb.FileRefused as refused:
        raise Invalid(str(refused), fields={"file": [str(refused)]}) from None


@transaction.atomic
def complaint_import_start(*, actor, tenant: Tenant, upload=None, path: str = "",
                           enqueue: bool = True) -> ComplaintImport:
    """Check a complaints file and record its import, queued. From the page, `upload` (stored with
    the import, and run by a Celery task queued after the commit); from the command, `path` (read in
    place by the caller, `enqueue=False`). Audited as `intake.import.started`.

    Refuses, creating nothing: roles other than supervisor and agents (Forbidden), another
    tenant (NotFound), a file that is not UTF-8 CSV, too large or without the required columns
    (Invalid)."""
    actor = coerce_actor(actor)
    _check_actor(actor, tenant)
    if (upload is None) == (not path):
        raise Invalid("Give either an uploaded file or a path.", fields={"file": ["Choose a file."]})
    if upload is not None:
        if upload.size > settings.INTAKE_MAX_UPLOAD_BYTES:
            message = (f"The file is {upload.size:,} bytes; the limit is {settings.INTAKE_MAX_UPLOAD_BYTES:,} bytes. "
                       f"Split it and import the parts one after the other.")
            raise Invalid(message, fields={"file": [message]})
        header = file_check(upload.file, filename=upload.name)
        filename, size = upload.name[:255], upload.size
    else:
        with open(path, "rb") as handle:
            header = file_check(handle, filename=path)
            filename, size = path.rsplit("/", 1)[-1][:255], handle.seek(0, io.SEEK_END)
    complaint_import = ComplaintImport(tenant=tenant, filename=filename, bytes_total=size,
                                       unknown_columns=list(header.unknown), actor_id=actor.identifier,
                                       created_by=actor.user if actor.is_user else None)
    if upload is not None:
        upload.file.seek(0)
        complaint_import.file.save(filename, File(upload.file), save=False)
    complaint_import.save()
    audit_record(tenant_id=tenant.pk, actor_type=actor.kind, actor_id=actor.identifier,
                 action="intake.import.started", target_type="complaint_import", target_id=complaint_import.pk,
                 policy_version=policy.POLICY_VERSION,
                 payload={"filename": filename, "bytes": size, "unknown_columns": list(header.unknown)})
    if enqueue:  # published after the commit; the relay publishes it later if the broker is down
        outbox_enqueue(task="intake.tasks.complaint_import_task", kwargs={"import_id": complaint_import.pk},
                       dedupe_key=f"intake-import:{complaint_import.pk}")
    return complaint_import


# --- running an import ------------------------------------------------------------------------

def complaint_import_claim(*, import_id: int) -> ComplaintImport | None:
    """Take a queued import (or one whose worker stopped mid-way) for this worker, by
    compare-and-set: None when it is finished or another worker is running it."""
    now = timezone.now()
    taken = ComplaintImport.objects.filter(pk=import_id).filter(
        Q(status=ImportStatus.QUEUED) | Q(status=ImportStatus.RUNNING, heartbeat_at__lt=now - STALLED_AFTER),
    ).update(status=ImportStatus.RUNNING, started_at=now, heartbeat_at=now)
    return ComplaintImport.objects.get(pk=import_id) if taken else None


def complaint_import_run(*, complaint_import: ComplaintImport, handle,
                         on_progress: Callable[[ComplaintImport], None] | None = None) -> ComplaintImport:
    """Run a claimed import over its binary `handle`: every chunk of good rows in its own
    transaction (claims, cases, events, audit records, progress), bad rows to the error report.
    Then finish it: counts, the error report file, `intake.import.finished` in the audit.

    Safe to run again on the same import (a worker that died): rows it already imported are claimed
    by this import, are not written twice, and count as created in the final counts."""
    actor = _import_actor(complaint_import)
    handle.seek(0)
    header = cfpb.read_header(handle)
    handle.seek(0)
    outcome = Outcome(unknown_columns=header.unknown)
    chunk_rows = settings.INTAKE_CHUNK_ROWS
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", newline="") as report:
        writer = csv.writer(report)
        writer.writerow((*ERROR_REPORT_COLUMNS, *header.columns))
        chunk: list[cfpb.Complaint] = []
        position = 0
        for position, row in cfpb.read_rows(handle, header):
            outcome.rows += 1
            if isinstance(row, cfpb.BadRow):
                outcome.errors += 1
                writer.writerow((row.row, row.complaint_id, row.problem, *row.values))
            else:
                chunk.append(row)
            if len(chunk) >= chunk_rows or (outcome.rows % chunk_rows == 0):
                _chunk_done(complaint_import, outcome, _write_chunk(
                    complaint_import=complaint_import, actor=actor, chunk=chunk, outcome=outcome, position=position))
                chunk = []
                if on_progress:
                    on_progress(complaint_import)
        _chunk_done(complaint_import, outcome, _write_chunk(
            complaint_import=complaint_import, actor=actor, chunk=chunk, outcome=outcome, position=position))
        report.seek(0)
        _finish(complaint_import=complaint_import, actor=actor, outcome=outcome,
                report=report if outcome.errors else None)
    if on_progress:
        on_progress(complaint_import)
    return complaint_import


def _import_actor(complaint_import: ComplaintImport) -> Actor:
    if complaint_import.created_by_id is not None:
        return Actor.for_user(complaint_import.created_by)
    return Actor.system(complaint_import.actor_id.partition(":")[2] or "import_complaints")


@retry_on_deadlock
@transaction.atomic
def _write_chunk(*, complaint_import: ComplaintImport, actor: Actor, chunk: list[cfpb.Complaint],
                 outcome: Outcome, position: int) -> tuple[int, int, int]:
    """One transaction: claim the chunk's complaint ids, open the cases of those newly claimed,
    record the progress. Returns (created, already imported, bytes read). A deadlock with another
    import of the same ids runs it again: nothing of the failed attempt was written, and `outcome`
    is advanced by the caller only once this has committed."""
    created = duplicates = 0
    if chunk:
        fresh, duplicates = _claim(complaint_import=complaint_import, chunk=chunk)
        new_cases = [NewCase(title=row.title, received_at=row.received_at, narrative=row.narrative,
                             fields=row.fields | {"source": cfpb.SOURCE, "source_reference": row.complaint_id})
                     for row in fresh]
        case_create_many(actor=actor, tenant=complaint_import.tenant, new_cases=new_cases)
        created = len(fresh)
    ComplaintImport.objects.filter(pk=complaint_import.pk).update(
        bytes_done=position, rows_read=outcome.rows, created_count=outcome.created + created,
        duplicate_count=outcome.duplicates + duplicates, error_count=outcome.errors, heartbeat_at=timezone.now())
    return created, duplicates, position


def _chunk_done(complaint_import: ComplaintImport, outcome: Outcome, written: tuple[int, int, int]) -> None:
    created, duplicates, position = written
    outcome.created += created
    outcome.duplicates += duplicates
    complaint_import.bytes_done, complaint_import.rows_read = position, outcome.rows
    complaint_import.created_count, complaint_import.duplicate_count = outcome.created, outcome.duplicates
    complaint_import.error_count = outcome.errors


def _claim(*, complaint_import: ComplaintImport, chunk: list[cfpb.Complaint]) -> tuple[list[cfpb.Complaint], int]:
    """(the rows newly claimed by this import, how many rows were claimed before or repeat a
    complaint of the chunk). Claims are inserted in complaint id order, so two imports of
    overlapping files take the unique index entries in one order."""
    first: dict[str, cfpb.Complaint] = {}
    for row in chunk:
        first.setdefault(row.complaint_id, row)
    ids = sorted(first, key=lambda value: (len(value), value))
    table = ImportedComplaint._meta.db_table
    created_at = ImportedComplaint._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    placeholders = ", ".join(["(%s, %s, %s, %s)"] * len(ids))
    params = []
    for complaint_id in ids:
        params += [complaint_import.tenant_id, complaint_id, complaint_import.pk, created_at]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (tenant_id, complaint_id, complaint_import_id, created_at) "
                       f"VALUES {placeholders} ON CONFLICT (tenant_id, complaint_id) DO NOTHING "
                       f"RETURNING complaint_id", params)
        claimed = {value for (value,) in cursor.fetchall()}
    fresh = [first[complaint_id] for complaint_id in first if complaint_id in claimed]
    return fresh, len(chunk) - len(fresh)


@transaction.atomic
def _finish(*, complaint_import: ComplaintImport, actor: Actor, outcome: Outcome, report) -> None:
    # Exact counts from the claims: a rerun after a worker died skipped (and counted as already
    # imported) the rows its earlier attempt had opened; they are this import's.
    outcome.created = ImportedComplaint.objects.filter(complaint_import=complaint_import).count()
    outcome.duplicates = outcome.rows - outcome.errors - outcome.created
    complaint_import.created_count, complaint_import.duplicate_count = outcome.created, outcome.duplicates
    if report is not None:
        complaint_import.error_report.save(f"{complaint_import.pk}-errors.csv", File(report), save=False)
    complaint_import.status = ImportStatus.DONE
    complaint_import.finished_at = timezone.now()
    complaint_import.bytes_done = complaint_import.bytes_total
    complaint_import.save(update_fields=["error_report", "status", "finished_at", "bytes_done", "created_count",
                                         "duplicate_count"])
    audit_record(tenant_id=complaint_import.tenant_id, actor_type=actor.kind, actor_id=actor.identifier,
                 action="intake.import.finished", target_type="complaint_import", target_id=complaint_import.pk,
                 policy_version=policy.POLICY_VERSION,
                 payload={"rows": outcome.rows, "created": outcome.created, "already_imported": outcome.duplicates,
                          "bad_rows": outcome.errors})


def complaint_import_fail(*, import_id: int, reason: str) -> None:
    """Record that an import stopped on an unexpected error (what it committed so far stays)."""
    ComplaintImport.objects.filter(pk=import_id, status=ImportStatus.RUNNING).update(
        status=ImportStatus.FAILED, failure=reason[:2000], finished_at=timezone.now())


# --- the dry run ---------------------------------------------------------------------------------

def complaint_import_check(*, tenant: Tenant, handle, keep_errors: int = 20) -> Outcome:
    """What an import of the file would do, writing nothing: rows that would open a case, rows
    already imported (claimed before, or repeated in the file) and bad rows (the first
    `keep_errors` kept). Holds the file's complaint ids in memory to find repeats."""
    header = cfpb.read_header(handle)
    handle.seek(0)
    outcome = Outcome(unknown_columns=header.unknown)
    seen: set[str] = set()
    chunk: list[cfpb.Complaint] = []

    def settle(rows: list[cfpb.Complaint]) -> None:
        claimed = set(ImportedComplaint.objects.filter(tenant=tenant, complaint_id__in={r.complaint_id for r in rows})
                      .values_list("complaint_id", flat=True))
        for row in rows:
            if row.complaint_id in claimed or row.complaint_id in seen:
                outcome.duplicates += 1
            else:
                outcome.created += 1
                seen.add(row.complaint_id)

    for _position, row in cfpb.read_rows(handle, header):
        outcome.rows += 1
        if isinstance(row, cfpb.BadRow):
            outcome.errors += 1
            if len(outcome.error_rows) < keep_errors:
                outcome.error_rows.append(row)
            continue
        chunk.append(row)
        if len(chunk) >= settings.INTAKE_CHUNK_ROWS:
            settle(chunk)
            chunk = []
    settle(chunk)
    return outcome


# --- e-mail intake --------------------------------------------------------------------------

EMAIL_ACTOR = Actor.system("email-intake")
EMAIL_SOURCE = "email"


class _Refused(Exception):
    """Why a message is refused, in words; its row records the reason."""


@transaction.atomic
def inbound_email_receive(*, message, provider: str, size: int) -> InboundMessage:
    """Take in one e-mail whose webhook signature checked out (anymail's `AnymailInboundMessage`).

    The organisation is the recipient's local part at INBOUND_EMAIL_DOMAIN (NotFound when none
    is). The message's row is inserted first: its unique (tenant, message key) makes a second
    delivery of the same message return the first row and change nothing. Then, checked in this
    order, a message is refused — its row kept with the reason, nothing else written — when it is
    larger than INBOUND_EMAIL_MAX_BYTES, scored as spam, quotes a case reference that is not the
    organisation's, or replies on a case whose complainant is not the sender. Otherwise a message
    quoting a case reference adds its text and attachments to that case as evidence; any other
    opens a case (as bulk intake opens one) with the text as its narrative and the attachments as
    evidence. Audited as `intake.email.accepted`.

    Locks: the message claim (its unique key), then the reference counter or the case row — the
    claim-before-counter order of bulk intake (docs/architecture.md, "Lock order")."""
    slug = mail.tenant_slug(message, domain=settings.INBOUND_EMAIL_DOMAIN)
    tenant = Tenant.objects.filter(slug=slug).first() if slug else None
    if tenant is None:
        raise NotFound(f"No organisation receives mail at {', '.join(mail.recipients(message)) or 'this address'}.")
    row, created = _claim_message(tenant=tenant, message=message, provider=provider, size=size)
    if not created:
        return row  # a replay: the first delivery already did what this one would
    try:
        with transaction.atomic():
            _check_message(row=row, message=message)
            row.case, row.opened_case = _file_message(tenant=tenant, row=row, message=message)
    except (_Refused, DomainError) as refusal:
        row.status, row.reason = InboundStatus.REFUSED, _reason(refusal)
        row.save(update_fields=["status", "reason"])
        logger.info("Inbound e-mail %s refused: %s", row.pk, row.reason)
        return row
    row.save(update_fields=["case", "opened_case"])
    audit_record(tenant_id=tenant.pk, actor_type=EMAIL_ACTOR.kind, actor_id=EMAIL_ACTOR.identifier,
                 action="intake.email.accepted", case_id=row.case.pk, target_type="inbound_message",
                 target_id=row.pk, policy_version=policy.POLICY_VERSION,
                 payload={"sender": row.sender, "opened_case": row.opened_case,
                          "attachments": row.attachment_count, "provider": provider})
    return row


def _claim_message(*, tenant: Tenant, message, provider: str, size: int) -> tuple[InboundMessage, bool]:
    key = mail.message_key(message)
    row = InboundMessage(tenant=tenant, message_key=key, provider=provider, size=size,
                         sender=mail.address_of(message.from_email)[:254],
                         recipient=(mail.recipients(message) or [""])[0][:254],
                         subject=(message.subject or "")[:300], spam_score=message.spam_score,
                         attachment_count=len(message.attachments), status=InboundStatus.ACCEPTED)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        return InboundMessage.objects.get(tenant=tenant, message_key=key), False
    return row, True


def _check_message(*, row: InboundMessage, message) -> None:
    limit = settings.INBOUND_EMAIL_MAX_BYTES
    if row.size > limit:
        raise _Refused(f"The message is {row.size:,} bytes, larger than the limit of {limit:,} bytes.")
    most = settings.INBOUND_EMAIL_MAX_SPAM_SCORE
    if message.spam_detected or (row.spam_score is not None and row.spam_score > most):
        score = "" if row.spam_score is None else f" (score {row.spam_score:g}, the limit is {most:g})"
        raise _Refused(f"The provider marked the message as spam{score}.")
    if not row.sender:
        raise _Refused("The message has no sender address.")


def _file_message(*, tenant: Tenant, row: InboundMessage, message) -> tuple[Case, bool]:
    """The case the message belongs to, with its text and attachments added as evidence."""
    text = mail.body_text(message)
    reference = mail.quoted_reference(message)
    if reference:
        case = Case.objects.filter(tenant=tenant, reference=reference).first()
        if case is None:
            raise _Refused(f"The message quotes {reference}, which is not a case of this organisation.")
        if case.complainant_email.strip().lower() != row.sender:
            raise _Refused(f"The sender is not the complainant of {reference}.")
        if text:
            evidence_add(actor=EMAIL_ACTOR, case=case, title=_evidence_title(row), text=text, source=EMAIL_SOURCE)
        opened = False
    else:
        title = (row.subject.strip() or f"Complaint by e-mail from {row.sender}")[:300]
        spec = NewCase(title=title, received_at=timezone.now().date(), narrative=text,
                       fields={"complainant_email": row.sender, "source": EMAIL_SOURCE,
                               "source_reference": row.message_key[:100]})
        case = case_create_many(actor=EMAIL_ACTOR, tenant=tenant, new_cases=[spec])[0]
        opened = True
    for part in message.attachments:
        upload = part.as_uploaded_file()
        if upload is not None:
            evidence_add(actor=EMAIL_ACTOR, case=case, title=upload.name or "Attachment", upload=upload,
                         source=EMAIL_SOURCE)
    return case, opened


def _reason(refusal: Exception) -> str:
    """The refusal in words, with a domain error's field messages (an attachment's size or type)."""
    details = [message for messages in getattr(refusal, "fields", {}).values() for message in messages]
    return " ".join([str(refusal), *details])


def _evidence_title(row: InboundMessage) -> str:
    return f"E-mail from the complainant: {row.subject.strip() or 'no subject'}"[:300]
