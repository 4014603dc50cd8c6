"""The CFPB portal's complaint export, read as a stream: the file checks made before anything is
written (type, encoding, header), and each row turned into the fields of a case or into the
reason it cannot be one. Pure functions over bytes and strings; nothing here touches the database."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache

COLUMNS = ("Date received", "Product", "Sub-product", "Issue", "Sub-issue", "Consumer complaint narrative",
           "Company public response", "Company", "State", "ZIP code", "Tags", "Submitted via",
           "Date sent to company", "Company response to consumer", "Timely response?", "Complaint ID")
# Without these a row cannot become a case; the others may be absent from an older export.
REQUIRED_COLUMNS = ("Complaint ID", "Date received", "Product", "Issue", "Company")
# Column -> (case field, the field's length).
CASE_COLUMNS = {
    "Product": ("product", 200), "Sub-product": ("sub_product", 200), "Issue": ("issue", 300),
    "Sub-issue": ("sub_issue", 300), "Company": ("company", 200), "State": ("consumer_state", 10),
    "Tags": ("tags", 200),
}
SOURCE = "CFPB"
NARRATIVE_TITLE = "Complaint narrative"
COMPLAINT_ID_LENGTH = 32
_READ_SIZE = 1024 * 1024
_ZIP_SIGNATURE = b"PK\x03\x04"


class FileRefused(Exception):
    """The file as a whole cannot be imported; the message says why and what to do."""


@dataclass(frozen=True)
class Header:
    columns: tuple[str, ...]
    unknown: tuple[str, ...]


@dataclass
class Complaint:
    """A good row: what its case is opened with."""

    row: int
    complaint_id: str
    received_at: date
    title: str
    narrative: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def narrative_bytes(self) -> bytes:
        return self.narrative.encode("utf-8")

    @property
    def narrative_sha256(self) -> str:
        return hashlib.sha256(self.narrative_bytes).hexdigest()


@dataclass(frozen=True)
class BadRow:
    row: int
    complaint_id: str
    problem: str
    values: tuple[str, ...]


def check_file(handle, *, max_bytes: int) -> Header:
    """Read the whole binary `handle` once, in constant memory, and refuse it (FileRefused) unless
    it is UTF-8 text of at most `max_bytes` whose first line names every required column. Leaves
    the handle at its start."""
    handle.seek(0)
    first = handle.read(_READ_SIZE)
    if not first:
        raise FileRefused("The file is empty. Export the complaints from the CFPB portal as CSV and upload that file.")
    if first.startswith(_ZIP_SIGNATURE):
        raise FileRefused("This is a spreadsheet workbook, not a CSV file. Save or export it as CSV (UTF-8) "
                          "and upload that file.")
    decoder = codecs.getincrementaldecoder("utf-8")()
    size, chunk = 0, first
    while chunk:
        size += len(chunk)
        if size > max_bytes:
            raise FileRefused(f"The file is larger than the limit of {max_bytes:,} bytes. Split it into smaller "
                              f"files and import them one after the other.")
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as error:
            raise FileRefused(f"The file is not UTF-8 text (an invalid byte near byte {size - len(chunk) + error.start:,})."
                              f" Export it again as CSV with UTF-8 encoding.") from None
        chunk = handle.read(_READ_SIZE)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise FileRefused("The file ends in the middle of a character: it is not complete UTF-8 text. "
                          "Export it again as CSV with UTF-8 encoding.") from None
    handle.seek(0)
    header = read_header(handle)
    handle.seek(0)
    return header


def read_header(handle) -> Header:
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    try:
        columns = tuple(column.strip() for column in next(csv.reader(text), []))
    except csv.Error as error:
        raise FileRefused(f"The first line of the file is not a CSV header ({error}).") from None
    finally:
        text.detach()
    missing = [column for column in REQUIRED_COLUMNS if column not in columns]
    if missing:
        raise FileRefused(f"The file has no column {', '.join(repr(c) for c in missing)}. It needs the columns of "
                          f"the CFPB complaint export ({', '.join(REQUIRED_COLUMNS)} at least) on its first line.")
    duplicated = sorted({column for column in columns if columns.count(column) > 1 and column in COLUMNS})
    if duplicated:
        raise FileRefused(f"The column {', '.join(repr(c) for c in duplicated)} appears more than once in the header.")
    return Header(columns=columns, unknown=tuple(c for c in columns if c not in COLUMNS))


def read_rows(handle, header: Header) -> Iterator[tuple[int, Complaint | BadRow]]:
    """(bytes read so far, each data row as a Complaint or a BadRow), streaming from the binary
    `handle` positioned at its start. Memory does not grow with the file."""
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    reader = csv.reader(text)
    next(reader, None)  # the header, already checked
    number = 0
    while True:
        number += 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            yield handle.tell(), BadRow(row=number, complaint_id="", problem=f"The row is not valid CSV ({error}).",
                                        values=())
            continue
        if not any(value.strip() for value in values):
            number -= 1  # a blank line is not a row
            continue
        yield handle.tell(), parse_row(number, header, values)


def clean(value: str | None) -> str:
    """The newer CFPB export writes the literal text "None" where the older one leaves a blank."""
    value = (value or "").strip()
    return "" if value == "None" else value


def parse_date(text: str) -> date | None:
    return _parse_date(clean(text))


@lru_cache(maxsize=4096)
def _parse_date(text: str) -> date | None:
    """A file's rows share few dates: each text is parsed once (dates are immutable)."""
    for parse in (lambda t: date.fromisoformat(t[:10]), lambda t: datetime.strptime(t, "%m/%d/%Y").date(),
                  lambda t: datetime.strptime(t, "%m/%d/%y").date()):
        try:
            return parse(text)
        except ValueError:
            continue
    return None


def parse_row(number: int, header: Header, values: list[str]) -> Complaint | BadRow:
    """One data row as a Complaint, or a BadRow naming its first problem in a plain sentence."""
    row = dict(zip(header.columns, values, strict=False))
    complaint_id = clean(row.get("Complaint ID"))[:COMPLAINT_ID_LENGTH]

    def bad(problem: str) -> BadRow:
        return BadRow(row=number, complaint_id=complaint_id, problem=problem, values=tuple(values))

    if len(values) != len(header.columns):
        return bad(f"The row has {len(values)} values but the header has {len(header.columns)} columns.")
    if not complaint_id:
        return bad("The Complaint ID is empty.")
    if not complaint_id.isdigit() or len(clean(row.get("Complaint ID"))) > COMPLAINT_ID_LENGTH:
        return bad(f"The Complaint ID {clean(row.get('Complaint ID'))[:40]!r} is not a number.")
    received = parse_date(row.get("Date received", ""))
    if received is None:
        return bad(f"The date received {clean(row.get('Date received'))[:40]!r} is not a date (expected YYYY-MM-DD).")
    fields = {}
    for column, (name, length) in CASE_COLUMNS.items():
        value = clean(row.get(column))
        if len(value) > length:
            return bad(f"The {column} is longer than {length} characters.")
        fields[name] = value
    if not fields["product"] and not fields["issue"]:
        return bad("The row has neither a Product nor an Issue, so the case would have no title.")
    subject = fields["issue"] or fields["product"]
    title = f"{subject} — {fields['company']}" if fields["company"] else subject
    return Complaint(row=number, complaint_id=complaint_id, received_at=received, title=title[:300],
                     narrative=(row.get("Consumer complaint narrative") or "").strip(), fields=fields)
