"""Product cues: the words that name a CFPB product outright ("credit report", "escrow",
"gift card"). The classifier learns from very few examples of anything but student loans; these
cues let a narrative that names its product be heard even when the product is rare in training.

Each product's score is the number of its DISTINCT cues that occur in the narrative or the
respondent's name (not how often: a long narrative repeating "mortgage" is no more a mortgage).
The weight given to a cue is tuned on the dev split (runs/evaluation.py), never on test.
"""

from __future__ import annotations

import re

PRODUCT_CUES: dict[str, tuple[str, ...]] = {
    "Student loan": (
        r"student loans?", r"federal student aid", r"\bfsa\b", r"\bpslf\b", r"public service loan forgiveness",
        r"income[- ]driven", r"\bidr\b", r"\bsave plan\b", r"borrower defen[cs]e", r"tuition", r"\bschool\b",
        r"college", r"department of education", r"mohela", r"nelnet", r"navient", r"sallie mae", r"aidvantage",
        r"edfinancial", r"pheaa", r"great lakes"),
    "Credit reporting, credit repair services, or other personal consumer reports": (
        r"credit reports?", r"credit bureaus?", r"credit reporting", r"equifax", r"trans ?union", r"experian",
        r"inquir(?:y|ies)", r"\bfcra\b", r"fair credit reporting", r"credit file", r"consumer reports?"),
    "Debt collection": (
        r"debt collect\w*", r"collection agency", r"collections? accounts?", r"collect(?:ing)? (?:a|the|this) debt",
        r"validat\w* (?:of )?(?:the |this |my )?debt", r"\bfdcpa\b", r"original creditor",
        r"debt (?:that )?i do(?:es)? not owe"),
    "Mortgage": (
        r"mortgage", r"escrow", r"foreclos\w*", r"loan modification", r"refinanc\w*", r"\bpmi\b", r"homeowner",
        r"home loan"),
    "Credit card or prepaid card": (
        r"credit cards?", r"gift cards?", r"prepaid card", r"annual fee", r"card issuer", r"authorized user",
        r"statement balance"),
    "Checking or savings account": (
        r"checking account", r"savings account", r"bank account", r"overdraft", r"debit card", r"\batm\b",
        r"deposit\w*"),
    "Vehicle loan or lease": (
        r"\bcar\b", r"vehicle", r"auto loan", r"\blease[ds]?\b", r"dealership", r"repossess\w*",
        r"toyota|honda|nissan|general motors|motor credit|auto finance"),
    "Money transfer, virtual currency, or money service": (
        r"money transfer", r"wire transfer", r"paypal", r"zelle", r"venmo", r"bitcoin|crypto\w*", r"money order"),
}
_COMPILED = {product: [re.compile(cue, re.IGNORECASE) for cue in cues] for product, cues in PRODUCT_CUES.items()}


def product_cues(text: str) -> dict[str, list[str]]:
    """For each product, the distinct cue words found in `text` (as they appear)."""
    found: dict[str, list[str]] = {}
    for product, patterns in _COMPILED.items():
        hits = [match.group(0) for pattern in patterns if (match := pattern.search(text or ""))]
        if hits:
            found[product] = hits
    return found
