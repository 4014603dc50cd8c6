"""Draw a set of narratives for the signals: the second tuning set (analyst/data/signals/tuning2/),
the held-out set (analyst/data/signals/heldout/), the second held-out set
(analyst/data/signals/heldout2/) or the third (analyst/data/signals/heldout3/); each set's SOURCE.md
says why.

The rule reads structured columns only (Product, Issue, Tags) and orders rows by the sha256 of their
Complaint ID; no narrative is read to choose a row. Rows already in any earlier set are left out.
Usage:

    python scripts/draw_signal_set.py tuning2|heldout|heldout2|heldout3 SOURCE_CSV

SOURCE_CSV is `complaints_sample.csv` of the public GitHub copy of the CFPB export named in SOURCE.md.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "analyst" / "data"
# Each set leaves out the rows of the files that existed when it was drawn.
EARLIER = {
    "tuning2": ("cfpb_complaints.csv", "signals/blind/complaints.csv", "signals/tuning/complaints.csv"),
    "heldout": ("cfpb_complaints.csv", "signals/blind/complaints.csv", "signals/tuning/complaints.csv",
                "signals/tuning2/complaints.csv"),
    "heldout2": ("cfpb_complaints.csv", "signals/blind/complaints.csv", "signals/tuning/complaints.csv",
                 "signals/tuning2/complaints.csv", "signals/heldout/complaints.csv"),
    "heldout3": ("cfpb_complaints.csv", "signals/blind/complaints.csv", "signals/tuning/complaints.csv",
                 "signals/tuning2/complaints.csv", "signals/heldout/complaints.csv", "signals/heldout2/complaints.csv"),
}
COLUMNS = ("Date received", "Product", "Sub-product", "Issue", "Sub-issue", "Consumer complaint narrative",
           "Company public response", "Company", "State", "ZIP code", "Tags", "Submitted via", "Date sent to company",
           "Company response to consumer", "Timely response?", "Complaint ID")
# Issues of the CFPB form under which harassment and time-critical harm are likelier.
HARM_ISSUES = {
    "Took or threatened to take negative or legal action", "Communication tactics",
    "Threatened to contact someone or share information improperly", "Taking/threatening an illegal action",
    "Struggling to pay mortgage", "Struggling to pay your loan", "Struggling to repay your loan",
    "Problems at the end of the loan or lease",
}
# Issues under which money lost, charged or asked back is likelier.
MONEY_ISSUES = {
    "Problem with a purchase shown on your statement", "Fees or interest", "Charged fees or interest you didn't expect",
    "Fraud or scam", "Unauthorized transactions or other transaction problem",
    "Problem with a lender or other company charging your account", "Problem caused by your funds being low",
    "Other transaction problem", "Unexpected or other fees", "Lost or stolen money order",
    "Money was not available when promised", "Trouble during payment process", "Problem when making payments",
    "Managing an account",
}
CREDIT_REPORTING = "Credit reporting, credit repair services, or other personal consumer reports"
# (stratum, how many): taken in this order, each from the rows no earlier stratum took.
QUOTAS = {
    "tuning2": (("harm", 40), ("money", 40), ("older", 20), ("credit_reporting", 70), ("any", 40)),
    "heldout": (("harm", 40), ("money", 50), ("older", 20), ("credit_reporting", 50), ("any", 40)),
    "heldout2": (("harm", 40), ("money", 50), ("older", 20), ("credit_reporting", 50), ("any", 40)),
    # The copy had no row of the harm issues or tagged "Older American" left: "any" makes up the 200.
    "heldout3": (("harm", 40), ("money", 50), ("older", 20), ("credit_reporting", 50), ("any", 108)),
}


def in_stratum(stratum: str, row: dict[str, str]) -> bool:
    return {
        "harm": row["Issue"] in HARM_ISSUES,
        "money": row["Issue"] in MONEY_ISSUES,
        "older": "Older American" in row["Tags"],
        "credit_reporting": row["Product"] == CREDIT_REPORTING,
        "any": True,
    }[stratum]


def iso(date: str) -> str:
    year, month, day = date.split("/")
    return f"{int(year):04d}-{int(month):02d}-{int(day):02d}"


def main(name: str, source: str) -> None:
    ours = {row["Complaint ID"].strip() for path in EARLIER[name]
            for row in csv.DictReader(open(DATA / path, encoding="utf-8"))}
    with open(source, newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle)
                if row["Consumer complaint narrative"].strip() and row["Complaint ID"].strip() not in ours]
    rows.sort(key=lambda row: hashlib.sha256(row["Complaint ID"].strip().encode()).hexdigest())
    chosen: list[dict[str, str]] = []
    for stratum, count in QUOTAS[name]:
        taken = [row for row in rows if row not in chosen and in_stratum(stratum, row)][:count]
        print(stratum, len(taken))
        chosen.extend(taken)
    chosen.sort(key=lambda row: int(row["Complaint ID"]))
    out = DATA / "signals" / name / "complaints.csv"
    out.parent.mkdir(exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in chosen:
            writer.writerow({**row, "Date received": iso(row["Date received"]),
                             "Date sent to company": iso(row["Date sent to company"])})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
