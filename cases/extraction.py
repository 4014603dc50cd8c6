"""Text extraction from PDF evidence, run by the worker after the upload commits.

`evidence_extraction_run` is the one write: it takes the pending EvidenceExtraction row with a
row lock, reads the PDF with pypdf within the limits in settings, and stores the text, its sha256
and where each page starts — or a clear reason the agents cannot read it (encrypted, image-only,
malformed, oversized). Running it twice (a redelivered task) finds the row done and does nothing.
`Evidence.read_text()` then gives the agents the text; `Evidence.page_for_offset()` maps an offset
back to its page for citations."""

from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from cases import policy
from cases.models import Evidence, EvidenceExtraction, ExtractionStatus
from cases.task_queue import evidence_extract_enqueue

logger = logging.getLogger(__name__)

EXTRACTED_TYPES = frozenset({"application/pdf"})


@dataclass
class ExtractionResult:
    readable: bool
    reason: str = ""
    text: str = ""
    page_offsets: list[int] = field(default_factory=list)
    page_count: int = 0


def extract_pdf(data: bytes, *, max_bytes: int, max_pages: int, max_chars: int) -> ExtractionResult:
    """Read a PDF's text layer. Never raises for a bad file: an unreadable one is a result."""
    import pypdf
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    if len(data) > max_bytes:
        return ExtractionResult(False, f"the file is {len(data)} bytes, over the {max_bytes}-byte limit for reading "
                                       f"PDFs")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # an owner-password-only PDF opens with the empty user password
            except (NotImplementedError, FileNotDecryptedError, PdfReadError, ValueError):
                opened = 0
            if not opened:
                return ExtractionResult(False, "the PDF is encrypted (password-protected)")
        pages = len(reader.pages)
        if pages > max_pages:
            return ExtractionResult(False, f"the PDF has {pages} pages, over the {max_pages}-page limit")
        parts: list[str] = []
        offsets: list[int] = []
        length = 0
        for page in reader.pages:
            offsets.append(length)
            text = (page.extract_text() or "").strip()
            chunk = text + "\n\n"
            parts.append(chunk)
            length += len(chunk)
            if length > max_chars:
                return ExtractionResult(False, f"the PDF's text is over the {max_chars}-character limit")
    except FileNotDecryptedError:
        return ExtractionResult(False, "the PDF is encrypted (password-protected)")
    except Exception as exc:  # noqa: BLE001 — pypdf raises many types for broken files; all mean "malformed"
        logger.info("PDF extraction failed: %s: %s", type(exc).__name__, exc)
        return ExtractionResult(False, f"the file is not a readable PDF ({type(exc).__name__})")
    text = "".join(parts)
    if not text.strip():
        return ExtractionResult(False, "the PDF has no text layer (scanned or image-only; it is not OCR'd)",
                                page_count=pages)
    return ExtractionResult(True, text=text, page_offsets=offsets, page_count=pages)


def extraction_wanted(evidence: Evidence) -> bool:
    return evidence.kind == "file" and evidence.content_type in EXTRACTED_TYPES


def evidence_extraction_create(*, evidence: Evidence) -> EvidenceExtraction | None:
    """The pending row written with the upload (inside its transaction), and the task queued once
    it commits. None for evidence that needs no extraction."""
    if not extraction_wanted(evidence):
        return None
    row = EvidenceExtraction.objects.create(tenant_id=evidence.tenant_id, evidence=evidence)

    evidence_extract_enqueue(evidence_id=evidence.pk)
    return row


@transaction.atomic
def evidence_extraction_run(*, evidence_id: int) -> EvidenceExtraction | None:
    """Complete the pending extraction of one evidence (the worker). Idempotent: a row already
    done (or none) is returned as it is."""
    row = EvidenceExtraction.objects.select_for_update().select_related("evidence").filter(
        evidence_id=evidence_id).first()
    if row is None or row.status != ExtractionStatus.PENDING:
        return row
    evidence = row.evidence
    try:
        with evidence.file.open("rb") as handle:
            data = handle.read(settings.ARBITER_PDF_MAX_BYTES + 1)
    except OSError as exc:
        result = ExtractionResult(False, f"the stored file cannot be opened ({type(exc).__name__})")
    else:
        if len(data) > settings.ARBITER_PDF_MAX_BYTES:
            data_size = evidence.size
            result = ExtractionResult(False, f"the file is {data_size} bytes, over the "
                                             f"{settings.ARBITER_PDF_MAX_BYTES}-byte limit for reading PDFs")
        else:
            result = extract_pdf(data, max_bytes=settings.ARBITER_PDF_MAX_BYTES,
                                 max_pages=settings.ARBITER_PDF_MAX_PAGES, max_chars=settings.ARBITER_PDF_MAX_CHARS)
    import pypdf

    row.status = ExtractionStatus.READABLE if result.readable else ExtractionStatus.UNREADABLE
    row.reason = result.reason[:300]
    row.text = result.text
    row.sha256 = hashlib.sha256(result.text.encode("utf-8")).hexdigest() if result.readable else ""
    row.page_offsets = result.page_offsets
    row.page_count = result.page_count
    row.extractor = f"pypdf {pypdf.__version__}"
    row.finished_at = timezone.now()
    row.save()
    audit_record(
        tenant_id=evidence.tenant_id, case_id=evidence.case_id, actor_type="system", actor_id="system:extractor",
        action="cases.evidence.extracted", target_type="evidence", target_id=evidence.pk,
        policy_version=policy.POLICY_VERSION, decision=row.status, evidence_refs=[evidence.pk],
        payload={"status": row.status, "reason": row.reason, "pages": row.page_count, "text_sha256": row.sha256,
                 "chars": len(row.text), "extractor": row.extractor})
    return row
