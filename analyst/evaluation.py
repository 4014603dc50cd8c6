"""Measuring the analyst on labelled complaints: `manage.py evaluate` runs on this.

The split
=========
Every complaint goes to one side by a deterministic hash of its Complaint ID
(`analyst.splits.split_of`): 60% train, 15% dev, 25% test. The offline classifier is trained on the train side
only while evaluating the sample (`classifier.training_scope`), thresholds and rules are tuned on dev, and
the figures reported are those of the test side, which the tuning never looked at. The signal sets'
rows are not in the sample: they are analysed with the shipped classifier, which learns from the sample
and from the blind and both tuning sets' complaints (ADR 0036), never from a held-out set's.

The signal sets
===============
`--split heldout3` measures the narrative signals on 200 further CFPB narratives
(`analyst/data/signals/heldout3/`, source and selection in its SOURCE.md), hand-labelled and
committed before any detector ran on them; no rule is tuned and the sentence reader is not trained
on them. Every row of that file is evaluated (no hash split). `--split heldout2`, `heldout`, `blind`,
`tuning` and `tuning2` do the same for the 193, 200, 300, 160 and 210 narratives the rules were tuned
on and the sentence reader learns from (analyst.signal_sets); each held-out set was the untouched one
until the next was labelled.

Throwaway cases
===============
`evaluate_rows` opens a throwaway tenant with one analyst inside ONE transaction that it rolls
back at the end: cases, runs, findings, audit events — nothing it writes survives, and no
existing case is read or touched. Each complaint becomes a case with the scored labels blanked
(product, sub-product, issue, sub-issue, tags; the title names only the complaint and the
company), is triaged (so a response notice is due and the drafter runs), and is analysed inline
through the real executor, exactly as `manage.py analyze --inline` would.
"""

from __future__ import annotations

import csv
import json
import re
import time
import uuid
from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from accounts.models import Tenant, User
from agents.text import clean_narrative
from analyst import classifier
from analyst.calibration import expected_calibration_error, reliability
from analyst.rubric import RUBRIC_COUNTS, case_rubric
from analyst.signal_sets import SIGNAL_LABELS, SIGNAL_SETS
from analyst.splits import split_of
from cases.models import Proposal
from cases.notice_checker import check_notice
from cases.services import case_create, case_transition
from runs.executor import drive_inline
from runs.models import Artifact, Finding
from runs.services import run_start

# Signals a CFPB label column supports: (signal code, the Tags value that labels it).
TAG_SIGNALS = (("SCRA", "Servicemember"), ("OLDER-AM", "Older American"))
# Signals labelled by hand on the narratives (analyst/data/signals/RUBRIC.md says what each means):
# the codes of agents/signals.py, and MONEY-BACK, which is triage reading a request for a refund.
# The signal sets apart from the sample (analyst.signal_sets): every row is evaluated, against its own labels.
NARRATIVE_SIGNALS = ("FRAUD-ID", "HARASSMENT", "URGENCY", "MONEY-LOSS", "TIME-LIMIT", "MISCONDUCT", "REPEAT-CONTACT",
                     "OLDER-AM", "SCRA", "MONEY-BACK")
# Targets the issue set for every narrative signal, on the test split.
SIGNAL_TARGETS = {"recall": 0.8, "precision": 0.7}
# Whether a narrative says anything at all about the tagged status: a deliberately broad screen of
# words (broader than the analyst's own rules in analyst/signals.py, so that recall among the
# complaints it passes is not 100% by construction). Most tagged complaints never mention it — the
# consumer ticks a box on the CFPB form — so recall is reported against every tagged complaint AND
# against the tagged complaints whose narrative passes this screen.
STATUS_MENTIONS = {
    "Servicemember": re.compile(
        r"\b(?:military|veterans?|army|navy|air force|marines?|coast guard|national guard|armed forces|deploy\w*"
        r"|active[- ]duty|service ?members?|scra|va (?:loans?|benefits?|home)|veterans affairs|gi bill|dd[- ]?214"
        r"|pcs|stationed|soldiers?|sailors?|tricare|reservists?|enlisted|troops?)\b", re.IGNORECASE),
    "Older American": re.compile(
        r"\b(?:(?:[6-9]\d|1[01]\d)[- ]years?[- ]old|aged? (?:of )?[6-9]\d|(?:i am|i'm|im) [6-9]\d|seniors?|retire\w*"
        r"|elderly|older americans?|social security(?! (?:number|#|no\b|card))|fixed income|medicare|pensions?"
        r"|aarp)\b", re.IGNORECASE),
}


def clean(value: str | None) -> str:
    """The newer CFPB export writes the literal text "None" where the older one leaves a blank."""
    value = (value or "").strip()
    return "" if value == "None" else value


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def select_rows(rows: list[dict[str, str]], *, split: str = "test", limit: int | None = None) -> list[dict[str, str]]:
    """Rows with a narrative and a product, on `split` ("all" and the signal sets: every row), ordered by id."""
    every = split == "all" or split in SIGNAL_SETS
    chosen = [row for row in rows if clean(row.get("Consumer complaint narrative")) and clean(row.get("Product"))
              and (every or split_of(row.get("Complaint ID", "")) == split)]
    chosen.sort(key=lambda row: clean(row.get("Complaint ID")))
    return chosen[:limit] if limit else chosen


def row_tags(row: dict[str, str]) -> set[str]:
    return {tag.strip() for tag in clean(row.get("Tags")).split(",") if tag.strip()}


def status_mentions(narrative: str) -> set[str]:
    """The tagged statuses (Servicemember, Older American) a narrative says anything about (STATUS_MENTIONS)."""
    text = clean_narrative(narrative)
    return {tag for tag, pattern in STATUS_MENTIONS.items() if pattern.search(text)}


# --- one analysed complaint ----------------------------------------------------------------------
@dataclass
class Outcome:
    complaint_id: str
    product: str
    issue: str
    tags: set[str]
    mentions: set[str] = field(default_factory=set)  # tagged statuses the narrative says something about
    predicted_product: str = ""
    predicted_issue: str = ""
    confidence: float | None = None
    issue_confidence: float | None = None
    company_disagrees: bool = False  # the narrative alone and the company prior disagreed on the product
    needs_analyst: bool = False
    signals: set[str] = field(default_factory=set)
    request_kind: str = ""  # triage's reading of what the consumer asks for ("refund", "removal", ...)
    risk_level: str = ""
    disputes: int = 0
    low_confidence_dispute: bool = False
    replans: int = 0
    dropped_citations: int = 0
    drafts: int = 0
    checker_flags: int | None = None
    rubric: dict[str, int] = field(default_factory=dict)  # analyst.rubric's counts over the case's notices and proposals
    rubric_texts: list[str] = field(default_factory=list)  # what the rubric read, kept when a count is not zero
    run_status: str = ""
    seconds: float = 0.0
    error: str = ""


def _case_fields(row: dict[str, str]) -> dict:
    complaint_id = clean(row.get("Complaint ID"))
    company = clean(row.get("Company"))
    received = clean(row.get("Date received"))[:10]
    title = f"CFPB complaint {complaint_id}" + (f" — {company}" if company else "")
    return {
        "title": title[:300],
        "received_at": date.fromisoformat(received) if received else None,
        "narrative": row.get("Consumer complaint narrative") or "",
        "company": company[:200],
        "consumer_state": clean(row.get("State"))[:10],
        "complainant_email": f"consumer-{complaint_id}@example.org",
        # Blanked, because they are scored: product, sub_product, issue, sub_issue, tags.
        "source": "CFPB-EVAL",
        "source_reference": complaint_id,
    }


def _checker():
    """The notice checker (cases.notice_checker.check_notice)."""
    return check_notice


def _flags_of(checker, notice, case, consumer_request=None) -> int:
    """The checker's flags on a draft: those stored on the notice when drafting checked it
    (`Notice.check_flags` for `checked_hash`), else a fresh check of its current text."""
    if notice.checked_hash == notice.content_hash:
        return len(notice.check_flags or [])
    return len(checker(case=case, recipient=notice.recipient, subject=notice.subject, body=notice.body,
                       consumer_request=consumer_request))


def _analyse(row: dict, *, tenant, analyst, provider: str | None, checker, run_seconds: int = 300) -> Outcome:
    outcome = Outcome(complaint_id=clean(row.get("Complaint ID")), product=clean(row.get("Product")),
                      issue=clean(row.get("Issue")), tags=row_tags(row),
                      mentions=status_mentions(row.get("Consumer complaint narrative") or ""))
    case = case_create(actor=analyst, tenant=tenant, **_case_fields(row))
    case_transition(actor=analyst, case=case, transition="triage")
    case.refresh_from_db()
    started = time.perf_counter()
    run = run_start(actor=analyst, case=case, provider=provider, enqueue=False)
    run = drive_inline(run_id=run.pk, worker_id=f"evaluate:{uuid.uuid4().hex[:8]}", timeout_seconds=run_seconds)
    outcome.seconds = time.perf_counter() - started
    outcome.run_status = run.status
    outcome.error = run.error or ""
    triage = Finding.objects.filter(run=run, agent="triage", type="triage").order_by("pk").last()
    request = (triage.data or {}).get("consumer_request") if triage is not None else None
    outcome.request_kind = str(request.get("kind") or "") if isinstance(request, dict) else ""
    if triage is not None:
        data = triage.data or {}
        outcome.predicted_product = str(data.get("product") or "")
        outcome.predicted_issue = str(data.get("issue") or "")
        outcome.confidence = triage.confidence
        outcome.needs_analyst = bool(data.get("needs_analyst"))
        outcome.issue_confidence = data.get("issue_confidence")
        outcome.company_disagrees = bool(data.get("company_product"))
    risk = Finding.objects.filter(run=run, agent="risk_assessor", type="risk_level").order_by("pk").last()
    if risk is not None:
        outcome.risk_level = str((risk.data or {}).get("risk_level") or "")
        outcome.signals = {str(s.get("code")) for s in (risk.data or {}).get("signals") or [] if isinstance(s, dict)}
    disputes = list(Artifact.objects.filter(run=run, kind="dispute").values_list("content", flat=True))
    outcome.disputes = len(disputes)
    outcome.low_confidence_dispute = any("confidence" in str((d or {}).get("topic", "")).lower()
                                         or "triage" in str((d or {}).get("topic", "")).lower()
                                         for d in disputes)
    outcome.replans = Artifact.objects.filter(run=run, kind="reflection", content__replan=True).count()
    outcome.dropped_citations = sum(len((f.data or {}).get("dropped") or [])
                                    for f in Finding.objects.filter(run=run, type="unverified_citation"))
    notices = list(case.notices.all())
    outcome.drafts = len(notices)
    if checker is not None and notices:
        outcome.checker_flags = sum(_flags_of(checker, notice, case, request) for notice in notices)
    _read_rubric(outcome, case, notices)
    return outcome


def _read_rubric(outcome: Outcome, case, notices: list) -> None:
    """The notice rubric (analyst/rubric.py) over the case's notices and proposals' rationales; the
    texts it read are kept on the outcome when a count is not zero, to show what was wrong."""
    rationales = list(Proposal.objects.filter(case=case).order_by("pk").values_list("rationale", flat=True))
    evidence = [item.read_text() for item in case.evidence.all()]
    outcome.rubric = case_rubric(case, notices, rationales, evidence)
    if any(outcome.rubric.values()):
        outcome.rubric_texts = [f"notice: {n.subject}\n{n.body}" for n in notices] + \
            [f"rationale: {r}" for r in rationales]


def evaluate_rows(rows: list[dict[str, str]], *, provider: str | None = None, on_outcome=None,
                  run_seconds: int = 300, scope: tuple[str, ...] | None = ("train",), say=None) -> list[Outcome]:
    """Analyse each row as a throwaway case (see the module docstring); everything is rolled back.
    Each analysis may take `run_seconds` (a small local model needs far more than the default).
    The classifier (with the signals' sentence reader) is trained on the sample's `scope` splits;
    None: the shipped one (for rows that are not in the sample: the signal sets), trained here first
    if it is not yet — this is an offline command, not a worker's step; `say` hears that it is."""
    from django.db import transaction

    if scope is None:
        classifier.classifier_train(say=say)
    checker = _checker()
    outcomes = []
    with classifier.training_scope(scope) if scope else nullcontext(), transaction.atomic():
        marker = uuid.uuid4().hex[:10]
        tenant = Tenant.objects.create(slug=f"evaluate-{marker}", name=f"Evaluation {marker} (rolled back)")
        analyst = User.objects.create(username=f"evaluate-{marker}", tenant=tenant, role="analyst")
        for row in rows:
            outcome = _analyse(row, tenant=tenant, analyst=analyst, provider=provider, checker=checker,
                               run_seconds=run_seconds)
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
        transaction.set_rollback(True)
    return outcomes


# --- figures ------------------------------------------------------------------------------------
def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _label_report(pairs: list[tuple[str, str]]) -> dict:
    """accuracy, macro recall and per-label recall of (truth, prediction) pairs."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for truth, predicted in pairs:
        per[truth][1] += 1
        per[truth][0] += int(truth == predicted)
    recalls = {label: round(hit / total, 4) for label, (hit, total) in sorted(per.items())}
    majority = Counter(truth for truth, _ in pairs).most_common(1)
    return {
        "n": len(pairs),
        "accuracy": _ratio(sum(t == p for t, p in pairs), len(pairs)),
        "macro_recall": round(sum(recalls.values()) / len(recalls), 4) if recalls else None,
        "majority_baseline": _ratio(majority[0][1], len(pairs)) if majority else None,
        "per_label_recall": recalls,
        "per_label_n": {label: total for label, (_, total) in sorted(per.items())},
    }


def report(outcomes: list[Outcome], *, split: str, provider: str, threshold: float | None,
           signal_labels: dict[str, dict[str, bool]] | None = None) -> dict:
    done = [o for o in outcomes if o.predicted_product]
    product = _label_report([(o.product, o.predicted_product) for o in done])
    issue = _label_report([(o.issue, o.predicted_issue) for o in done])
    # Issue recall per product: how well the issue holds inside each product.
    issue_by_product = {}
    for name in sorted({o.product for o in done}):
        inside = [o for o in done if o.product == name]
        issue_by_product[name] = _ratio(sum(o.issue == o.predicted_issue for o in inside), len(inside))
    signals = {}
    for code, tag in TAG_SIGNALS:
        labelled = [o for o in done if tag in o.tags]
        stated = [o for o in labelled if tag in o.mentions]
        flagged = [o for o in done if code in o.signals]
        signals[f"{code} (Tags: {tag})"] = {
            "labelled": len(labelled), "flagged": len(flagged),
            "recall": _ratio(sum(code in o.signals for o in labelled), len(labelled)),
            "precision": _ratio(sum(tag in o.tags for o in flagged), len(flagged)),
            # Only the complaints whose narrative says anything about the status (STATUS_MENTIONS).
            "labelled_and_stated": len(stated),
            "recall_when_stated": _ratio(sum(code in o.signals for o in stated), len(stated)),
        }
    drafts = sum(o.drafts for o in outcomes)
    checked = [o for o in outcomes if o.checker_flags is not None]
    low = [o for o in done if o.needs_analyst]
    seconds = [o.seconds for o in outcomes]
    # Coverage and accuracy of the product above each threshold (to choose ARBITER_TRIAGE_MIN_CONFIDENCE on dev).
    by_threshold = {}
    for threshold_value in (0.4, 0.5, 0.6, 0.7, 0.8):
        above = [o for o in done if (o.confidence or 0) >= threshold_value]
        by_threshold[str(threshold_value)] = {
            "coverage": _ratio(len(above), len(done)),
            "product_accuracy": _ratio(sum(o.product == o.predicted_product for o in above), len(above))}
    return {
        "split": split, "provider": provider, "complaints": len(outcomes),
        "runs": dict(Counter(o.run_status for o in outcomes)),
        "triage_min_confidence": threshold,
        "product": product, "issue": issue, "issue_accuracy_within_product": issue_by_product,
        "product_accuracy_when_confident": _ratio(sum(o.product == o.predicted_product for o in done
                                                      if not o.needs_analyst), len(done) - len(low)),
        "confidence_thresholds": by_threshold,
        "signals": signals,
        "notices": {"drafts": drafts,
                    "checker": "available" if _checker() is not None else "checker unavailable",
                    "flags": sum(o.checker_flags for o in checked) if checked else None,
                    "flags_per_draft": _ratio(sum(o.checker_flags for o in checked), drafts) if checked and drafts
                    else None},
        "disputes": {"raised": sum(o.disputes for o in outcomes),
                     "runs_with_disputes": sum(o.disputes > 0 for o in outcomes),
                     "needs_analyst": len(low),
                     "needs_analyst_with_dispute": sum(o.low_confidence_dispute for o in low),
                     "dispute_on_triage_when_confident": sum(o.low_confidence_dispute for o in done
                                                             if not o.needs_analyst)},
        "notice_rubric": rubric_report(outcomes),
        "calibration": calibration_report(done),
        "replans": sum(o.replans for o in outcomes),
        "dropped_citations": sum(o.dropped_citations for o in outcomes),
        "risk_levels": dict(Counter(o.risk_level for o in outcomes)),
        "seconds_per_analysis": {"mean": round(sum(seconds) / len(seconds), 3) if seconds else None,
                                 "median": round(sorted(seconds)[len(seconds) // 2], 3) if seconds else None,
                                 "max": round(max(seconds), 3) if seconds else None},
        "errors": [f"{o.complaint_id}: {o.error}" for o in outcomes if o.error][:20],
        "narrative_signals": narrative_signal_report(outcomes, signal_labels) if signal_labels else None,
    }


def rubric_report(outcomes: list[Outcome]) -> dict:
    """The notice rubric's counts summed over every analysis (each must be zero), and the
    complaints where one was not, with the texts the rubric read (at most 10)."""
    totals = {key: sum(o.rubric.get(key, 0) for o in outcomes) for key in RUBRIC_COUNTS}
    faults = [{"complaint_id": o.complaint_id, "counts": {k: v for k, v in o.rubric.items() if v},
               "texts": o.rubric_texts} for o in outcomes if any(o.rubric.values())]
    return {"counts": totals, "analyses": len(outcomes), "faults": faults[:10]}


def calibration_report(done: list[Outcome]) -> dict:
    """Expected calibration error (10 bins) of the product and issue confidences, with the bins, and
    how the narrative-against-company disagreements fared (analyst/calibration.py)."""
    figures = {}
    for name, truth, predicted, confidence in (
            ("product", "product", "predicted_product", "confidence"),
            ("issue", "issue", "predicted_issue", "issue_confidence")):
        pairs = [(float(getattr(o, confidence)), getattr(o, truth) == getattr(o, predicted))
                 for o in done if getattr(o, confidence) is not None]
        figures[name] = {"n": len(pairs), "ece": expected_calibration_error(pairs),
                         "mean_confidence": _ratio(sum(c for c, _ in pairs), len(pairs)) if pairs else None,
                         "accuracy": _ratio(sum(ok for _, ok in pairs), len(pairs)),
                         "bins": reliability(pairs)}
    doubted = [o for o in done if o.company_disagrees]
    figures["narrative_against_company"] = {
        "disagreements": len(doubted),
        "product_accuracy_when_disagreeing": _ratio(sum(o.product == o.predicted_product for o in doubted),
                                                    len(doubted))}
    return figures


def format_calibration(data: dict) -> list[str]:
    lines = []
    for name in ("product", "issue"):
        part = data[name]
        ece = "—" if part["ece"] is None else f"{part['ece']:.3f}"
        lines.append(f"{name.capitalize()} calibration: expected calibration error {ece} (10 bins, n={part['n']}); "
                     f"mean confidence {_pct(part['mean_confidence'])} against accuracy {_pct(part['accuracy'])}")
        lines.append("    " + "; ".join(f"{row['bin']}: {row['n']} at {row['confidence']:.2f}, right "
                                       f"{_pct(row['accuracy'])}" for row in part["bins"]))
    doubt = data["narrative_against_company"]
    lines.append(f"Narrative and company prior disagreed on {doubt['disagreements']} complaint(s) (each disputed); "
                 f"product right in {_pct(doubt['product_accuracy_when_disagreeing'])} of them")
    return lines


def _pct(value) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def format_report(data: dict) -> list[str]:
    lines = [f"Evaluation on the {data['split']} split: {data['complaints']} complaint(s), provider "
             f"{data['provider']}; runs {data['runs']}."]
    for name in ("product", "issue"):
        part = data[name]
        lines.append(f"{name.capitalize()}: accuracy {_pct(part['accuracy'])} (majority baseline "
                     f"{_pct(part['majority_baseline'])}), macro recall {_pct(part['macro_recall'])}, n={part['n']}")
        for label, recall in part["per_label_recall"].items():
            lines.append(f"    {_pct(recall):>7} of {part['per_label_n'][label]:>3}  {label}")
    if data.get("product_accuracy_when_confident") is not None:
        lines.append(f"Product accuracy where triage was confident: {_pct(data['product_accuracy_when_confident'])}")
    lines.append("Product above a confidence threshold: " + "; ".join(
        f"≥{t}: {_pct(v['product_accuracy'])} on {_pct(v['coverage'])}" for t, v in data["confidence_thresholds"].items()))
    lines.append("Signals (labelled by the Tags column; tags were blanked, so only the narrative counts):")
    for name, part in data["signals"].items():
        lines.append(f"    {name}: recall {_pct(part['recall'])} of {part['labelled']} tagged; "
                     f"{_pct(part['recall_when_stated'])} of the {part['labelled_and_stated']} whose narrative "
                     f"mentions it; precision {_pct(part['precision'])} of {part['flagged']} flagged")
    notices = data["notices"]
    flags = "checker unavailable" if notices["checker"] != "available" else \
        f"{notices['flags']} flag(s), {notices['flags_per_draft']} per draft"
    lines.append(f"Notices: {notices['drafts']} draft(s); notice checker: {flags}")
    disputes = data["disputes"]
    lines.append(f"Disputes: {disputes['raised']} raised in {disputes['runs_with_disputes']} run(s); triage needed an "
                 f"analyst in {disputes['needs_analyst']} (threshold {data['triage_min_confidence']}), "
                 f"{disputes['needs_analyst_with_dispute']} of them disputed; triage disputed while confident: "
                 f"{disputes['dispute_on_triage_when_confident']}")
    rubric = data["notice_rubric"]
    lines.append(f"Notice rubric over {rubric['analyses']} analysis(es) (each must be 0): "
                 + "; ".join(f"{key} {value}" for key, value in rubric["counts"].items()))
    for fault in rubric["faults"]:
        lines.append(f"    {fault['complaint_id']}: {fault['counts']}")
    lines.extend(format_calibration(data["calibration"]))
    lines.append(f"Re-plans: {data['replans']}; quotes dropped as unverifiable: {data['dropped_citations']}; "
                 f"risk levels {data['risk_levels']}")
    seconds = data["seconds_per_analysis"]
    lines.append(f"Time per analysis: mean {seconds['mean']} s, median {seconds['median']} s, max {seconds['max']} s "
                 "(the first analysis includes training the classifier)")
    lines.extend(format_narrative_signals(data.get("narrative_signals")))
    for error in data["errors"]:
        lines.append(f"    error: {error}")
    return lines


# --- signals against the hand labels ---------------------------------------------------------------
SIGNAL_NAMES = {"FRAUD-ID": "identity theft", "HARASSMENT": "harassment", "URGENCY": "time-critical harm",
                "MONEY-LOSS": "money lost (over $1,000)", "TIME-LIMIT": "a legal time limit",
                "MISCONDUCT": "the company accused of misconduct", "REPEAT-CONTACT": "repeated contact",
                "OLDER-AM": "an older consumer", "SCRA": "a servicemember or veteran",
                "MONEY-BACK": "money back requested"}


def read_signal_labels(path: Path = SIGNAL_LABELS) -> dict[str, dict[str, bool]]:
    """{complaint id: {signal: present}} from a labels file: one JSON object a line with
    complaint_id, signal and present (analyst/data/signals/labels.jsonl)."""
    labels: dict[str, dict[str, bool]] = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                labels[str(item["complaint_id"]).strip()][str(item["signal"])] = bool(item["present"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"line {number} is not a signal label ({exc})") from exc
    return dict(labels)


def raised_signals(outcome: Outcome) -> set[str]:
    """The narrative signals an analysis raised: the risk assessor's codes, and MONEY-BACK when
    triage read the consumer's request as a refund."""
    return set(outcome.signals) | ({"MONEY-BACK"} if outcome.request_kind == "refund" else set())


def signal_figures(pairs: list[tuple[dict[str, bool], set[str]]]) -> dict[str, dict]:
    """Recall and precision of each narrative signal over (labels of a complaint, signals raised on
    it) pairs; `meets_target` against SIGNAL_TARGETS (None when there is nothing to count: no
    complaint labelled with the signal and none flagged; a figure that cannot be computed — recall
    with no positive, precision with no flag — is not held against it)."""
    figures = {}
    for code in NARRATIVE_SIGNALS:
        judged = [(labels[code], code in raised) for labels, raised in pairs if code in labels]
        labelled = sum(truth for truth, _ in judged)
        flagged = sum(raised for _, raised in judged)
        found = sum(truth and raised for truth, raised in judged)
        recall, precision = _ratio(found, labelled), _ratio(found, flagged)
        figures[code] = {
            "complaints": len(judged), "labelled": labelled, "flagged": flagged, "found": found,
            "recall": recall, "precision": precision,
            "meets_target": None if not labelled and not flagged else
            (recall is None or recall >= SIGNAL_TARGETS["recall"])
            and (precision is None or precision >= SIGNAL_TARGETS["precision"]),
        }
    return figures


def label_agreement(first: dict[str, dict[str, bool]], second: dict[str, dict[str, bool]]) -> dict[str, dict]:
    """How two readings of the same narratives agree, per signal, over the complaints both judged:
    positives of each, positives in both, the second reading's recall and precision against the
    first, and Cohen's kappa (agreement beyond what the two readings' rates give by chance)."""
    figures = {}
    for code in NARRATIVE_SIGNALS:
        pairs = [(first[c][code], second[c][code]) for c in first if code in first[c] and code in second.get(c, {})]
        n, a, b = len(pairs), sum(x for x, _ in pairs), sum(y for _, y in pairs)
        both = sum(x and y for x, y in pairs)
        observed = sum(x == y for x, y in pairs) / n if n else None
        chance = (a * b + (n - a) * (n - b)) / (n * n) if n else None
        kappa = None if observed is None else 1.0 if chance == 1 else (observed - chance) / (1 - chance)
        figures[code] = {"complaints": n, "first": a, "second": b, "both": both, "recall": _ratio(both, a),
                         "precision": _ratio(both, b), "kappa": None if kappa is None else round(kappa, 3)}
    return figures


def narrative_signal_report(outcomes: list[Outcome], labels: dict[str, dict[str, bool]]) -> dict:
    """Per-signal figures of the analyses against the hand labels, with the complaints missed and
    flagged wrongly (ids, to look at on train and dev only)."""
    judged = [o for o in outcomes if o.complaint_id in labels]
    figures = signal_figures([(labels[o.complaint_id], raised_signals(o)) for o in judged])
    for code, part in figures.items():
        part["missed"] = [o.complaint_id for o in judged
                          if labels[o.complaint_id].get(code) and code not in raised_signals(o)]
        part["false_alarms"] = [o.complaint_id for o in judged
                                if labels[o.complaint_id].get(code) is False and code in raised_signals(o)]
    return {"complaints": len(judged), "targets": SIGNAL_TARGETS, "signals": figures}


def format_narrative_signals(data: dict | None) -> list[str]:
    if not data:
        return ["Signals against the hand labels: no labels given."]
    targets = data["targets"]
    lines = [f"Signals against the hand labels ({data['complaints']} complaint(s) labelled; target recall "
             f"{_pct(targets['recall'])} and precision {_pct(targets['precision'])} for every signal):"]
    for code, part in data["signals"].items():
        verdict = {None: "nothing to measure here", True: "meets the target"}.get(part["meets_target"],
                                                                                  "below the target")
        lines.append(f"    {SIGNAL_NAMES.get(code, code)} ({code}): recall {_pct(part['recall'])} "
                     f"({part['found']} of {part['labelled']} labelled), precision {_pct(part['precision'])} "
                     f"({part['found']} of {part['flagged']} flagged); {verdict}")
    return lines
