"""The labelled complaints the offline classifier learns from: the CFPB sample shipped in
analyst/data/, read into `Example`s (rows with a narrative and a product, in file order)."""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from agents.text import clean_narrative

DATA_FILE = Path(__file__).resolve().parent / "data" / "cfpb_complaints.csv"


@dataclass(frozen=True)
class Example:
    complaint_id: str
    text: str
    product: str
    sub_product: str
    issue: str
    company: str = ""
    received: date | None = None


def received_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat((value or "").strip()[:10])
    except ValueError:
        return None


def load_examples(path: Path = DATA_FILE) -> list[Example]:
    """Rows with a narrative, in file order (the bytes-literal narrative decoded)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    examples = []
    for row in rows:
        text = clean_narrative(row.get("Consumer complaint narrative"))
        if not text or not row.get("Product"):
            continue
        examples.append(Example(
            complaint_id=row.get("Complaint ID", ""),
            text=text,
            product=row["Product"].strip(),
            sub_product=(row.get("Sub-product") or "").strip(),
            issue=(row.get("Issue") or "").strip(),
            company=(row.get("Company") or "").strip(),
            received=received_date(row.get("Date received")),
        ))
    return examples


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()
