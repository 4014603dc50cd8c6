"""Prior knowledge about CFPB products, written down by hand: the words that name a
product outright, and the respondents whose line of business is known.

Product cues
============
The classifier learns from very few examples of anything but student loans; these cues let a
narrative that names its product be heard even when the product is rare or absent in training.
They come from the CFPB's published product taxonomy — the product's name, its sub-product names
("store credit card", "VA mortgage", "international money transfer"), the words of its issue and
sub-issue names ("escrow", "loan modification", "notice of right to dispute") — and the everyday
words for the same things ("Zelle", "repossessed", "APR"). Each product's score is the number of
its DISTINCT cues that occur in the narrative or the respondent's name (not how often: a long
narrative repeating "mortgage" is no more a mortgage).

Lines of business
=================
`company_lines` names the products a respondent is publicly known to deal in (the three credit
bureaus report on consumers, Navient services student loans, Synchrony issues credit cards, a
collection agency collects debts). Written from public knowledge of the industry, not from the
labelled sample; a bank that does many things gets all of them (weaker evidence for each). The
classifier counts a known line as pseudo-complaints in the respondent's complaint mix, so a
respondent never seen in training still speaks for its products, and one seen often is
governed by its own complaints.

The weights of both are chosen by cross-validation on the train and dev splits
(analyst/tuning.py), never on test.
"""

from __future__ import annotations

import re

CREDIT_REPORTING = "Credit reporting, credit repair services, or other personal consumer reports"
STUDENT_LOAN = "Student loan"
DEBT_COLLECTION = "Debt collection"
MORTGAGE = "Mortgage"
CARD = "Credit card or prepaid card"
CHECKING = "Checking or savings account"
VEHICLE = "Vehicle loan or lease"
MONEY_TRANSFER = "Money transfer, virtual currency, or money service"

PRODUCT_CUES: dict[str, tuple[str, ...]] = {
    STUDENT_LOAN: (
        r"student loans?", r"federal student aid", r"\bfsa\b", r"\bpslf\b", r"public service loan forgiveness",
        r"income[- ]driven", r"\bidr\b", r"\bsave plan\b", r"borrower defen[cs]e", r"tuition", r"\bschool\b",
        r"college", r"department of education", r"mohela", r"nelnet", r"navient", r"sallie mae", r"aidvantage",
        r"edfinancial", r"pheaa", r"great lakes",
        # sub-products and issue words: "Federal student loan servicing", "Private student loan",
        # "Issue where my lender is my school"; the repayment plans and loan types by name
        r"parent plus", r"direct (?:consolidation )?loans?", r"\bibr\b|income[- ]based repayment", r"\bfafsa\b",
        r"loan forgiveness", r"\bpaye\b"),
    CREDIT_REPORTING: (
        r"credit reports?", r"credit bureaus?", r"credit reporting", r"equifax", r"trans ?union", r"experian",
        r"inquir(?:y|ies)", r"\bfcra\b", r"fair credit reporting", r"credit file", r"consumer reports?",
        # issue and sub-issue words: "Unable to get your credit report or credit score", "Problem with fraud
        # alerts or security freezes", "Credit monitoring or identity theft protection services",
        # "Old information reappears or never goes away", "Credit repair services"
        r"credit scores?", r"security freeze|credit freeze", r"fraud alert", r"credit monitoring",
        r"credit repair", r"reinvestigat\w*", r"tradelines?", r"\b1681\w*"),
    DEBT_COLLECTION: (
        r"debt collect\w*", r"collection agency", r"collections? accounts?", r"collect(?:ing)? (?:a|the|this) debt",
        r"validat\w* (?:of )?(?:the |this |my )?debt", r"\bfdcpa\b", r"original creditor",
        r"debt (?:that )?i do(?:es)? not owe",
        # issue and sub-issue words: "Written notification about debt" ("notice of right to dispute",
        # "enough information to verify debt"), "Attempts to collect debt not owed", "Communication tactics",
        # "Took or threatened to take negative or legal action"; sub-products ("Medical debt", "Payday loan debt")
        r"collectors?\b", r"verif\w* (?:of )?(?:the |this |my )?debt", r"right to dispute", r"debt buyer",
        r"medical (?:debt|bills?)", r"pay ?day loans?", r"cease and desist", r"collection (?:letters?|notices?|calls?)",
        r"sold (?:my|the) (?:debt|account)"),
    MORTGAGE: (
        r"mortgage", r"escrow", r"foreclos\w*", r"loan modification", r"refinanc\w*", r"\bpmi\b", r"homeowner",
        r"home loan",
        # sub-products ("FHA mortgage", "VA mortgage", "Home equity loan or line of credit", "Reverse mortgage")
        # and issue words ("Trouble during payment process", "Struggling to pay mortgage", "Closing on a mortgage")
        r"\bheloc\b|home equity", r"\bfha\b", r"\bva loan\b", r"trial (?:period|modification)", r"loss mitigation",
        r"property tax(?:es)?", r"homeowners? insurance|hazard insurance", r"short sale", r"\bdeed\b",
        r"closing costs?"),
    CARD: (
        r"credit cards?", r"gift cards?", r"prepaid card", r"annual fee", r"card issuer", r"authorized user",
        r"statement balance",
        # sub-products ("General-purpose credit card or charge card", "Store credit card", "Payroll card") and issue
        # words ("Problem with a purchase shown on your statement", "Fees or interest", "Trouble using your card",
        # "Advertising and marketing, including promotional offers")
        r"store card|store credit", r"charge card", r"payroll card", r"\bapr\b", r"balance transfer",
        r"cash advance", r"rewards? (?:points?|program)|cash ?back", r"chargeback", r"credit limit",
        r"minimum payment", r"promotional (?:rate|offer|period|financing|apr)", r"card (?:account|holder|member)"),
    CHECKING: (
        r"checking account", r"savings account", r"bank account", r"overdraft", r"debit card", r"\batm\b",
        r"deposit\w*",
        # sub-products ("CD (Certificate of deposit)") and issue words ("Managing an account", "Opening an
        # account", "Closing an account", "Problem caused by your funds being low")
        r"certificate of deposit", r"\bnsf\b|insufficient funds", r"cashing a check|cashed (?:a|my|the) check",
        r"(?:bank|account) (?:was |were )?(?:closed|frozen)|froze my account", r"\bteller\b", r"\bbranch\b",
        r"\bdebited\b"),
    VEHICLE: (
        r"\bcar\b", r"vehicle", r"auto loan", r"\blease[ds]?\b", r"dealership", r"repossess\w*",
        r"toyota|honda|nissan|general motors|motor credit|auto finance",
        # sub-products ("Loan", "Lease") and issue words ("Problems at the end of the loan or lease",
        # "Getting a loan or lease"); everyday words
        r"\btruck\b", r"\bgap (?:insurance|coverage)\b", r"trade[- ]in", r"car payments?", r"\bcar title\b",
        r"odometer|mileage"),
    MONEY_TRANSFER: (
        r"money transfer", r"wire transfer", r"paypal", r"zelle", r"venmo", r"bitcoin|crypto\w*", r"money order",
        # sub-products ("Domestic (US) money transfer", "International money transfer", "Virtual currency",
        # "Mobile or digital wallet", "Traveler's check or cashier's check") and issue words ("Money was not
        # available when promised", "Fraud or scam", "Unauthorized transactions")
        r"western union", r"moneygram", r"cash app", r"remittance", r"international transfer",
        r"virtual currency", r"(?:mobile|digital) wallet", r"cashier'?s check", r"sent (?:the )?money to",
        r"coinbase"),
}
_COMPILED = {product: [re.compile(cue, re.IGNORECASE) for cue in cues] for product, cues in PRODUCT_CUES.items()}

_BANK = (CHECKING, CARD, MORTGAGE, VEHICLE, CREDIT_REPORTING)
# (pattern on the normalised company name — lower case, punctuation as spaces — and its products)
COMPANY_LINES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Nationwide consumer reporting agencies, specialty reporting companies and credit repair.
    (r"\b(?:equifax|experian|transunion|trans union|innovis|lexisnexis|chexsystems|clarity services"
     r"|credit karma|lexington law|credit repair)\b", (CREDIT_REPORTING,)),
    # Student loan servicers, lenders and guaranty agencies.
    (r"\b(?:navient|nelnet|mohela|missouri higher education|aidvantage|maximus|edfinancial|great lakes"
     r"|pheaa|aes|american education services|pennsylvania higher education|granite state|cornerstone"
     r"|oklahoma student loan|ecmc|sallie mae|slm corporation|climb credit|mpower|college ave|earnest"
     r"|student loan|higher education|student assistance|educational credit)\b", (STUDENT_LOAN,)),
    # Collection agencies and debt buyers.
    (r"\b(?:portfolio recovery|midland credit|midland funding|encore capital|lvnv|resurgent|cavalry"
     r"|jefferson capital|convergent|transworld systems|i ?c system|enhanced recovery|diversified consultants"
     r"|hunter warfield|radius global|allied interstate|performant|pioneer credit recovery|account control"
     r"|gc services|credence resource|afni|receivables performance|harris harris|i ?q data|ar resources"
     r"|amsher|monarch recovery|caine weiner|united collection|national credit systems|credit collection"
     r"|collection|collections|recovery|recoveries|receivables|debt)\b", (DEBT_COLLECTION,)),
    # Mortgage lenders and servicers.
    (r"\b(?:mortgage|home loans?|mr cooper|nationstar|ocwen|phh|shellpoint|newrez|carrington|loancare|cenlar"
     r"|rocket|quicken loans|roundpoint|ditech|fci lender|select portfolio servicing|specialized loan servicing"
     r"|bayview|dovenmuehle|pennymac|lakeview|freedom mortgage|loandepot|fay servicing|rushmore|midfirst"
     r"|planet home)\b", (MORTGAGE,)),
    # Credit card issuers and prepaid card programme managers.
    (r"\b(?:synchrony|comenity|bread financial|alliance data|discover|american express|credit one|merrick"
     r"|first premier|continental finance|mission lane|goldman sachs|green dot|netspend|card services"
     r"|blackhawk)\b", (CARD,)),
    # Money transmitters and virtual currency exchanges.
    (r"\b(?:paypal|venmo|western union|moneygram|coinbase|block inc|square inc|cash app|wise|transferwise"
     r"|remitly|xoom|ria|intermex|crypto com|binance|gemini|kraken)\b", (MONEY_TRANSFER,)),
    # Vehicle lenders and lessors.
    (r"\b(?:motor credit|auto finance|auto|motors|gm financial|general motors financial|santander consumer"
     r"|ally financial|credit acceptance|westlake|exeter|carmax|bridgecrest|drivetime|honda finance"
     r"|nissan motor|hyundai capital|vw credit|bmw financial|mercedes benz financial|consumer portfolio services"
     r"|global lending services|regional acceptance|flagship credit)\b", (VEHICLE,)),
    # Banks and credit unions: accounts, cards, mortgages and car loans, and what they report about them.
    (r"\b(?:bank|bancorp|banc|bankshares|wells fargo|jpmorgan|chase|citibank|citigroup|capital one|pnc|truist"
     r"|td bank|u s bank|us bank|usaa|navy federal|credit union|fifth third|huntington|regions|keycorp"
     r"|citizens financial|santander bank|bbva|barclays|bmo|m t bank)\b", _BANK),
)
_COMPANY_LINES = [(re.compile(pattern), products) for pattern, products in COMPANY_LINES]


def product_cues(text: str) -> dict[str, list[str]]:
    """For each product, the distinct cue words found in `text` (as they appear)."""
    found: dict[str, list[str]] = {}
    for product, patterns in _COMPILED.items():
        hits = [match.group(0) for pattern in patterns if (match := pattern.search(text or ""))]
        if hits:
            found[product] = hits
    return found


def company_lines(normalised_company: str) -> set[str]:
    """The products a respondent is publicly known to deal in (empty when it is not known).
    `normalised_company`: lower case, runs of anything but letters and digits as one space."""
    lines: set[str] = set()
    for pattern, products in _COMPANY_LINES:
        if pattern.search(normalised_company or ""):
            lines.update(products)
    return lines

