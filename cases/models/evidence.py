"""Evidence: immutable uploads and texts of a case, and the text extracted from a file."""

from __future__ import annotations

from django.db import models

from cases.models.base import ImmutableModel
from cases.models.case import Case
from cases.models.choices import EvidenceKind, ExtractionStatus


def evidence_upload_path(instance: Evidence, filename: str) -> str:
    return f"evidence/{instance.tenant_id}/{instance.case_id}/{instance.sha256[:16]}-{filename}"


class Evidence(ImmutableModel):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="evidence")
    kind = models.CharField(max_length=10, choices=EvidenceKind.choices)
    title = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    file = models.FileField(upload_to=evidence_upload_path, blank=True)
    filename = models.CharField(max_length=255, blank=True)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    source = models.CharField(max_length=200, blank=True)
    added_by = models.CharField(max_length=200)  # actor identifier
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "evidence"

    def __str__(self) -> str:
        return f"E{self.pk} {self.title}"

    def read_text(self, limit: int | None = None) -> str:
        """The evidence as text (files decoded as UTF-8 where they are text; a PDF's extracted text,
        or a line saying why the agents cannot read it)."""
        if self.kind == EvidenceKind.TEXT:
            content = self.text
        elif self.content_type.startswith("text/") or self.content_type == "application/json":
            with self.file.open("rb") as handle:
                content = handle.read(limit * 4 if limit else -1).decode("utf-8", errors="replace")
        elif self.content_type == "application/pdf":
            content = self._pdf_text()
        else:
            content = f"[{self.content_type} file {self.filename}, {self.size} bytes]"
        return content[:limit] if limit else content

    @property
    def extraction_or_none(self) -> EvidenceExtraction | None:
        try:
            return self.extraction
        except EvidenceExtraction.DoesNotExist:
            return None

    def _pdf_text(self) -> str:
        extraction = self.extraction_or_none
        if extraction is not None and extraction.status == ExtractionStatus.READABLE:
            return extraction.text
        if extraction is not None and extraction.status == ExtractionStatus.UNREADABLE:
            return f"[{self.content_type} file {self.filename}, {self.size} bytes: {extraction.status_message}]"
        return f"[{self.content_type} file {self.filename}, {self.size} bytes: text extraction pending]"

    def page_for_offset(self, offset: int) -> int | None:
        """The 1-based page of the PDF on which character `offset` of `read_text()` falls (None
        when the evidence has no extracted pages)."""
        extraction = self.extraction_or_none
        return extraction.page_for_offset(offset) if extraction is not None else None


class EvidenceExtraction(models.Model):
    """The text extracted from a file evidence (PDF: cases/extraction.py), kept beside the
    immutable Evidence row: its own sha256 (of the text) and where each page starts in it.
    One row per evidence (unique), written pending at upload and completed once by the worker."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    evidence = models.OneToOneField(Evidence, on_delete=models.PROTECT, related_name="extraction")
    status = models.CharField(max_length=20, choices=ExtractionStatus.choices, default=ExtractionStatus.PENDING)
    reason = models.CharField(max_length=300, blank=True, help_text="Why the agents cannot read it.")
    text = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    page_offsets = models.JSONField(default=list, blank=True, help_text="Character offset where each page starts.")
    page_count = models.PositiveIntegerField(default=0)
    extractor = models.CharField(max_length=60, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"extraction E{self.evidence_id} {self.status}"

    @property
    def status_message(self) -> str:
        if self.status == ExtractionStatus.UNREADABLE:
            return f"not readable by the agents: {self.reason}"
        if self.status == ExtractionStatus.PENDING:
            return "text extraction pending"
        return f"text extracted ({self.page_count} page{'s' if self.page_count != 1 else ''})"

    def page_for_offset(self, offset: int) -> int | None:
        if self.status != ExtractionStatus.READABLE or not self.page_offsets or offset < 0 or offset > len(self.text):
            return None
        from bisect import bisect_right

        return bisect_right(self.page_offsets, offset)
