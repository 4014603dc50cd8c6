"""PDF evidence the agents can read: text extracted by the worker after the upload
commits, stored beside the evidence with its own hash and page offsets; unreadable files get a
clear status, never an error page. Test PDFs are generated here (fpdf2, pypdf)."""

import hashlib
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from audit.models import AuditEvent
from cases import services
from cases.extraction import evidence_extraction_run
from cases.models import EvidenceExtraction, ExtractionStatus

PAGE_ONE = "Statement of account for March. The disputed charge of 1200 dollars appears twice."
PAGE_TWO = "Letter from the bank dated April: we decline to refund the second charge."


def text_pdf(*pages: str) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def encrypted_pdf() -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(PAGE_ONE))))
    writer.encrypt(user_password="secret", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def blank_pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=595, height=842)  # a scan without a text layer reads like this
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def upload(case, analyst, data: bytes, name="statement.pdf"):
    return services.evidence_add(actor=analyst, case=case, title=name,
                                 upload=SimpleUploadedFile(name, data, content_type="application/pdf"))


def add_and_extract(case, analyst, data: bytes, capture, name="statement.pdf"):
    with capture(execute=False) as callbacks:
        evidence = upload(case, analyst, data, name)
    assert len(callbacks) == 1  # the extraction is queued only once the upload commits
    assert evidence.extraction.status == ExtractionStatus.PENDING
    assert "text extraction pending" in evidence.read_text()
    evidence_extraction_run(evidence_id=evidence.pk)  # what the task does
    evidence.refresh_from_db()
    return type(evidence).objects.select_related("extraction").get(pk=evidence.pk)


def test_a_text_pdf_is_read_with_its_hash_and_pages(case, analyst, django_capture_on_commit_callbacks):
    evidence = add_and_extract(case, analyst, text_pdf(PAGE_ONE, PAGE_TWO), django_capture_on_commit_callbacks)
    extraction = evidence.extraction
    assert (extraction.status, extraction.page_count) == (ExtractionStatus.READABLE, 2)
    text = evidence.read_text()
    assert "disputed charge of 1200 dollars" in text and "decline to refund" in text
    assert extraction.sha256 == hashlib.sha256(text.encode()).hexdigest() != evidence.sha256
    assert evidence.page_for_offset(text.index("disputed charge")) == 1
    assert evidence.page_for_offset(text.index("decline to refund")) == 2
    assert evidence.page_for_offset(len(text) + 5) is None
    audit = AuditEvent.objects.get(action="cases.evidence.extracted")
    assert (audit.payload["status"], audit.payload["pages"], audit.payload["text_sha256"]) == (
        "readable", 2, extraction.sha256)
    # A second delivery of the task changes nothing.
    assert evidence_extraction_run(evidence_id=evidence.pk).finished_at == extraction.finished_at
    assert AuditEvent.objects.filter(action="cases.evidence.extracted").count() == 1


@pytest.mark.parametrize(("make", "reason"), [
    (encrypted_pdf, "encrypted"),
    (blank_pdf, "no text layer"),
    (lambda: b"%PDF-1.7\n\x00\x13garbage that is not a pdf at all" * 10, "not a readable PDF"),
])
def test_unreadable_pdfs_get_a_clear_status(make, reason, case, analyst, django_capture_on_commit_callbacks):
    evidence = add_and_extract(case, analyst, make(), django_capture_on_commit_callbacks)
    assert evidence.extraction.status == ExtractionStatus.UNREADABLE and reason in evidence.extraction.reason
    assert f"not readable by the agents: {evidence.extraction.reason}" in evidence.read_text()
    assert evidence.page_for_offset(0) is None


def test_an_oversized_pdf_is_kept_but_not_read(case, analyst, settings, django_capture_on_commit_callbacks):
    data = text_pdf(PAGE_ONE)
    settings.ARBITER_PDF_MAX_BYTES = len(data) - 1
    evidence = add_and_extract(case, analyst, data, django_capture_on_commit_callbacks)
    assert evidence.extraction.status == ExtractionStatus.UNREADABLE
    assert "limit for reading PDFs" in evidence.extraction.reason
    settings.ARBITER_PDF_MAX_BYTES = 10 * len(data)
    settings.ARBITER_PDF_MAX_PAGES = 1
    many = add_and_extract(case, analyst, text_pdf(PAGE_ONE, PAGE_TWO), django_capture_on_commit_callbacks,
                           name="long.pdf")
    assert "2 pages, over the 1-page limit" in many.extraction.reason


def test_other_files_are_not_extracted(case, analyst):
    evidence = services.evidence_add(actor=analyst, case=case, title="CSV", upload=SimpleUploadedFile(
        "s.csv", b"a,b\n1,2\n", content_type="text/csv"))
    assert not EvidenceExtraction.objects.filter(evidence=evidence).exists()
    assert evidence.read_text() == "a,b\n1,2\n"


def test_the_case_page_previews_the_text_and_marks_unreadable_files(client, case, analyst,
                                                                    django_capture_on_commit_callbacks):
    readable = add_and_extract(case, analyst, text_pdf(PAGE_ONE), django_capture_on_commit_callbacks)
    unreadable = add_and_extract(case, analyst, encrypted_pdf(), django_capture_on_commit_callbacks, name="locked.pdf")
    pending = upload(case, analyst, text_pdf(PAGE_TWO), name="new.pdf")
    client.force_login(analyst)
    response = client.get(reverse("web:case_detail", kwargs={"reference": case.reference}))
    assert response.status_code == 200
    html = response.content.decode()

    def item(evidence):
        block = html[html.index(f'id="evidence-{evidence.pk}"'):]
        return block[:block.index("</li>")]

    assert 'data-extraction="readable"' in item(readable) and "disputed charge of 1200 dollars" in item(readable)
    assert "Not readable by the agents:</strong> the PDF is encrypted" in item(unreadable)
    assert 'data-extraction="pending"' in item(pending)
