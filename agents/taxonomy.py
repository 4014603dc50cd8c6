"""The CFPB product and issue taxonomy: the only labels triage may answer with.

Two shipped files:

- agents/data/cfpb_published_taxonomy.json — the taxonomy as the CFPB publishes it (its complaint
  form's products, sub-products, issues and sub-issues: today's, and those of the earlier forms
  with the dates they were in use), the renames over the years mapped to their successors, and its
  source (agents/data/SOURCE.md). Any label in it is a label of the taxonomy: `products()` and
  `issues()` (the enum of the output schemas and the triage node's check) come from it, so a
  label the consumer recorded that the CFPB publishes is accepted even if the sample never shows it.
- agents/data/cfpb_taxonomy.json — derived from the labelled sample (`derive_taxonomy`): products,
  and for each its sub-products and issues with their counts. The offline classifier learns from
  it (it can only answer labels it saw), plus the one vintage rule the sample needs: the CFPB
  retired the product "Credit card" on 2017-04-24, folding it into "Credit card or prepaid card";
  the classifier learns the current product and answers the label in force on the received date.

`python -m agents.taxonomy` rewrites the derived file from analyst/data/cfpb_complaints.csv (a
test checks the file is exactly what the data gives); `python -m agents.taxonomy --check` checks
that every label of the sample is in the published taxonomy and that every rename leads to one.
Nothing is downloaded, at run time or by these commands.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from datetime import date
from functools import lru_cache
from pathlib import Path

TAXONOMY_FILE = Path(__file__).resolve().parent / "data" / "cfpb_taxonomy.json"
PUBLISHED_FILE = Path(__file__).resolve().parent / "data" / "cfpb_published_taxonomy.json"
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


@lru_cache(maxsize=1)
def load_published() -> dict:
    with open(PUBLISHED_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def _published_entries() -> list[tuple[str, dict]]:
    """(product, entry) of today's form, the retired products, and the earlier forms' issues of the
    products that kept their names."""
    published = load_published()
    return [*published["products"].items(), *published["retired"].items(),
            *published["retired_issues_of_kept_products"].items()]


def sample_products() -> list[str]:
    """The products of the labelled sample (what the offline classifier can learn)."""
    return list(load_taxonomy()["products"])


def products() -> list[str]:
    """Every product label of the taxonomy: published (today's and retired) and seen in the sample."""
    return sorted({name for name, _ in _published_entries()} | set(sample_products()))


def issues() -> list[str]:
    """Every issue label of the taxonomy: published (any product, any form) and seen in the sample."""
    published = {issue for _, entry in _published_entries() for issue in entry["issues"]}
    sampled = {issue for entry in load_taxonomy()["products"].values() for issue in entry["issues"]}
    return sorted(published | sampled)


def published_issues_of(product: str) -> tuple[str, ...]:
    """The issues the CFPB publishes for `product` (on any form it was offered), sorted."""
    return tuple(sorted({issue for name, entry in _published_entries() if name == product
                         for issue in entry["issues"]}))


def sub_issues() -> list[str]:
    return sorted({sub for _, entry in _published_entries() for subs in entry["issues"].values() for sub in subs})


def published_sub_products() -> list[str]:
    return sorted({sub for _, entry in _published_entries() for sub in entry.get("sub_products") or []})


def today_name(label: str, kind: str = "products") -> str:
    """The label's name on today's form: a label today's form offers is its own; another follows
    the renames (`kind`: products, issues or sub_issues) until it reaches one today's form offers
    (or the renames end). Some renames were splits (their note says how): the name is the main
    successor's."""
    published = load_published()
    current = published["products"]
    today = (set(current) if kind == "products" else
             {issue for entry in current.values() for issue in entry["issues"]} if kind == "issues" else
             {sub for entry in current.values() for subs in entry["issues"].values() for sub in subs})
    renames = {item["old"]: item["new"] for item in published["renames"][kind]}
    seen = {label}
    while label not in today and label in renames and renames[label] not in seen:
        label = renames[label]
        seen.add(label)
    return label


def check_sample(path: Path = DATA_FILE) -> list[str]:
    """What the published taxonomy lacks: labels of the sample it does not list, and renames whose
    successor it does not list. Empty when the two agree."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    known = {"Product": set(products()), "Sub-product": set(published_sub_products()), "Issue": set(issues()),
             "Sub-issue": set(sub_issues())}
    problems = sorted({f"{column} {value!r} (complaint {row.get('Complaint ID')}) is not in the published taxonomy"
                       for row in rows for column, labels in known.items()
                       if (value := _clean(row.get(column))) and value not in labels})
    names = {"products": known["Product"], "issues": known["Issue"], "sub_issues": known["Sub-issue"]}
    for kind, labels in names.items():
        problems += [f"rename {item['old']!r} -> {item['new']!r} leads to no published {kind[:-1].replace('_', '-')}"
                     for item in load_published()["renames"][kind] if item["new"] not in labels]
    return problems


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


def main(argv: list[str]) -> int:
    if "--check" in argv:
        problems = check_sample()
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s): {len(products())} products, {len(issues())} issues, "
              f"{len(sub_issues())} sub-issues in the taxonomy.")
        return 1 if problems else 0
    write_taxonomy()
    return 0


if __name__ == "__main__":  # pragma: no cover - a maintenance script
    sys.exit(main(sys.argv[1:]))
