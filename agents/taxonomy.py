"""The CFPB product and issue taxonomy: the only labels triage may answer with.

Derived from the labelled sample (`derive_taxonomy`) into the shipped file
agents/data/cfpb_taxonomy.json — products, and for each its sub-products and issues with their
counts — plus the one vintage rule the sample needs: the CFPB retired the product "Credit card"
on 2017-04-24, folding it into "Credit card or prepaid card". The classifier learns the current
product and answers the label that was in force on the complaint's received date.

`python -m agents.taxonomy` rewrites the shipped file from analyst/data/cfpb_complaints.csv;
a test checks the file is exactly what the data gives.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from datetime import date
from functools import lru_cache
from pathlib import Path

TAXONOMY_FILE = Path(__file__).resolve().parent / "data" / "cfpb_taxonomy.json"
# The complaint sample the shipped taxonomy was derived from (read only by `python -m agents.taxonomy`).
DATA_FILE = Path(__file__).resolve().parent.parent / "analyst" / "data" / "cfpb_complaints.csv"

# Product labels the CFPB retired: old label -> (its successor, the first day the successor applied).
RETIRED_PRODUCTS = {"Credit card": ("Credit card or prepaid card", "2017-04-24")}


def _clean(value: str | None) -> str:
    value = (value or "").strip()
    return "" if value == "None" else value


def derive_taxonomy(path: Path = DATA_FILE) -> dict:
    """The taxonomy as the labelled data gives it (deterministic: sorted keys, counts)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    products: dict[str, dict[str, Counter]] = {}
    for row in rows:
        product = _clean(row.get("Product"))
        if not product:
            continue
        entry = products.setdefault(product, {"issues": Counter(), "sub_products": Counter()})
        if issue := _clean(row.get("Issue")):
            entry["issues"][issue] += 1
        if sub_product := _clean(row.get("Sub-product")):
            entry["sub_products"][sub_product] += 1
    return {
        "source": "Derived from analyst/data/cfpb_complaints.csv by agents/taxonomy.py (derive_taxonomy).",
        "retired_products": {old: {"successor": new, "retired_on": day}
                             for old, (new, day) in sorted(RETIRED_PRODUCTS.items())},
        "products": {product: {"issues": dict(sorted(entry["issues"].items())),
                               "sub_products": dict(sorted(entry["sub_products"].items()))}
                     for product, entry in sorted(products.items())},
    }


@lru_cache(maxsize=1)
def load_taxonomy() -> dict:
    with open(TAXONOMY_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def products() -> list[str]:
    return list(load_taxonomy()["products"])


def issues() -> list[str]:
    return sorted({issue for entry in load_taxonomy()["products"].values() for issue in entry["issues"]})


def issues_of(product: str) -> dict[str, int]:
    """Issues seen with `product`, by count (for a product with none of its own, those of the
    products it replaced or that replaced it)."""
    taxonomy = load_taxonomy()["products"]
    own = (taxonomy.get(product) or {}).get("issues") or {}
    if own:
        return dict(own)
    family = {product, current_product(product)} | {old for old, (new, _) in RETIRED_PRODUCTS.items()
                                                     if new == product}
    counts: Counter = Counter()
    for name in family:
        counts.update((taxonomy.get(name) or {}).get("issues") or {})
    return dict(counts)


def sub_products_of(product: str) -> dict[str, int]:
    return dict((load_taxonomy()["products"].get(product) or {}).get("sub_products") or {})


def current_product(product: str) -> str:
    """The label a retired product is learnt under (its successor); others unchanged."""
    return RETIRED_PRODUCTS.get(product, (product, ""))[0]


def label_in_force(product: str, received: date | None) -> str:
    """The product label that applied on `received`: the retired label before its retirement day."""
    if received is None:
        return product
    for old, (new, day) in RETIRED_PRODUCTS.items():
        if product == new and received < date.fromisoformat(day) and old in load_taxonomy()["products"]:
            return old
    return product


def write_taxonomy(path: Path = TAXONOMY_FILE) -> None:
    path.write_text(json.dumps(derive_taxonomy(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - a maintenance script
    write_taxonomy()
