"""The hand labels of the narrative signals and how `evaluate` reports against them."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents import taxonomy
from agents.citations import has_internal_code
from agents.text import clean_narrative
from analyst.evaluation import (
    NARRATIVE_SIGNALS,
    Outcome,
    format_narrative_signals,
    label_agreement,
    narrative_signal_report,
    raised_signals,
    read_rows,
    read_signal_labels,
    select_rows,
    signal_figures,
)
from analyst.rubric import RUBRIC_COUNTS, implied_contact, ours
from analyst.signal_sets import (
    BLIND_CSV,
    BLIND_LABELS,
    HELDOUT2_CSV,
    HELDOUT2_LABELS,
    HELDOUT3_CSV,
    HELDOUT3_LABELS,
    HELDOUT_CSV,
    HELDOUT_LABELS,
    HELDOUT_SECOND_READING,
    SIGNAL_LABELS,
    TUNING2_CSV,
    TUNING2_LABELS,
    TUNING_CSV,
    TUNING_LABELS,
)
from cases.models import Case
from runs.models import AgentRun
from runs.providers import ProviderError
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import FakeProvider

ROWS = {row["Complaint ID"].strip(): row for row in read_rows(taxonomy.DATA_FILE)}
BLIND_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(BLIND_CSV)}
TUNING_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(TUNING_CSV)}
TUNING2_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(TUNING2_CSV)}
HELDOUT_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT_CSV)}
HELDOUT2_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT2_CSV)}
HELDOUT3_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT3_CSV)}


@pytest.mark.parametrize(("labels_file", "rows", "complaints"), [
    (SIGNAL_LABELS, ROWS, 191),
    (BLIND_LABELS, BLIND_ROWS, 300),  # the blind set (analyst/data/signals/blind/SOURCE.md)
    (TUNING_LABELS, TUNING_ROWS, 160),  # the tuning set (analyst/data/signals/tuning/SOURCE.md)
    (TUNING2_LABELS, TUNING2_ROWS, 210),  # the second tuning set (analyst/data/signals/tuning2/SOURCE.md)
    (HELDOUT_LABELS, HELDOUT_ROWS, 200),  # the held-out set (analyst/data/signals/heldout/SOURCE.md)
    (HELDOUT_SECOND_READING, HELDOUT_ROWS, 200),  # its second reading
    (HELDOUT2_LABELS, HELDOUT2_ROWS, 193),  # the second held-out set (analyst/data/signals/heldout2/SOURCE.md)
    (HELDOUT3_LABELS, HELDOUT3_ROWS, 200),  # the third held-out set (analyst/data/signals/heldout3/SOURCE.md)
], ids=["sample", "blind", "tuning", "tuning2", "heldout", "heldout-second-reading", "heldout2", "heldout3"])
def test_every_complaint_is_labelled_for_every_signal_once_and_each_quote_is_verbatim(labels_file, rows, complaints):
    lines = [json.loads(line) for line in labels_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = Counter((item["complaint_id"], item["signal"]) for item in lines)
    assert len(rows) == complaints
    assert set(pairs) == {(cid, code) for cid in rows for code in NARRATIVE_SIGNALS}
    assert set(pairs.values()) == {1} and len(lines) == len(rows) * len(NARRATIVE_SIGNALS)
    for item in lines:
        if item["present"]:
            narrative = clean_narrative(rows[item["complaint_id"]]["Consumer complaint narrative"])
            assert item["quote"].strip() and item["quote"] in narrative, item
        else:
            assert not item.get("quote"), item


def test_each_signal_has_positives_to_measure():
    labels = read_signal_labels()
    positives = Counter(code for per in labels.values() for code, present in per.items() if present)
    assert all(positives[code] >= 1 for code in NARRATIVE_SIGNALS)
    assert positives["MONEY-LOSS"] == 16 and positives["TIME-LIMIT"] == 10 and positives["FRAUD-ID"] == 32


def test_the_blind_set_shares_no_complaint_with_the_sample_and_has_positives_of_every_signal():
    assert not set(BLIND_ROWS) & set(ROWS)
    labels = read_signal_labels(BLIND_LABELS)
    positives = Counter(code for per in labels.values() for code, present in per.items() if present)
    assert positives == {"FRAUD-ID": 101, "HARASSMENT": 4, "URGENCY": 13, "MONEY-LOSS": 21, "TIME-LIMIT": 49,
                         "MISCONDUCT": 107, "REPEAT-CONTACT": 79, "OLDER-AM": 2, "SCRA": 5, "MONEY-BACK": 25}


def test_the_tuning_set_shares_no_complaint_with_the_sample_or_the_blind_set():
    assert not set(TUNING_ROWS) & set(ROWS) and not set(TUNING_ROWS) & set(BLIND_ROWS)
    labels = read_signal_labels(TUNING_LABELS)
    positives = Counter(code for per in labels.values() for code, present in per.items() if present)
    assert positives == {"FRAUD-ID": 51, "HARASSMENT": 10, "URGENCY": 9, "MONEY-LOSS": 3, "TIME-LIMIT": 22,
                         "MISCONDUCT": 57, "REPEAT-CONTACT": 47, "OLDER-AM": 3, "SCRA": 1, "MONEY-BACK": 4}


@pytest.mark.parametrize(("rows", "earlier", "labels_file", "positives"), [
    (TUNING2_ROWS, (ROWS, BLIND_ROWS, TUNING_ROWS), TUNING2_LABELS,
     {"FRAUD-ID": 46, "HARASSMENT": 14, "URGENCY": 20, "MONEY-LOSS": 7, "TIME-LIMIT": 18, "MISCONDUCT": 55,
      "REPEAT-CONTACT": 60, "OLDER-AM": 2, "SCRA": 4, "MONEY-BACK": 12}),
    (HELDOUT_ROWS, (ROWS, BLIND_ROWS, TUNING_ROWS, TUNING2_ROWS), HELDOUT_LABELS,
     {"FRAUD-ID": 47, "HARASSMENT": 31, "URGENCY": 31, "MONEY-LOSS": 12, "TIME-LIMIT": 26, "MISCONDUCT": 75,
      "REPEAT-CONTACT": 80, "OLDER-AM": 10, "SCRA": 4, "MONEY-BACK": 28}),
    (HELDOUT2_ROWS, (ROWS, BLIND_ROWS, TUNING_ROWS, TUNING2_ROWS, HELDOUT_ROWS), HELDOUT2_LABELS,
     {"FRAUD-ID": 45, "HARASSMENT": 20, "URGENCY": 21, "MONEY-LOSS": 11, "TIME-LIMIT": 10, "MISCONDUCT": 54,
      "REPEAT-CONTACT": 85, "OLDER-AM": 3, "SCRA": 5, "MONEY-BACK": 26}),
    # no servicemember in the third (SOURCE.md: no harm-issue row was left to draw)
    (HELDOUT3_ROWS, (ROWS, BLIND_ROWS, TUNING_ROWS, TUNING2_ROWS, HELDOUT_ROWS, HELDOUT2_ROWS), HELDOUT3_LABELS,
     {"FRAUD-ID": 63, "HARASSMENT": 1, "URGENCY": 10, "MONEY-LOSS": 10, "TIME-LIMIT": 18, "MISCONDUCT": 46,
      "REPEAT-CONTACT": 49, "OLDER-AM": 4, "MONEY-BACK": 22}),
], ids=["tuning2", "heldout", "heldout2", "heldout3"])
def test_a_later_set_shares_no_complaint_with_an_earlier_one_and_has_its_positives(rows, earlier, labels_file,
                                                                                   positives):
    assert not set(rows) & set().union(*earlier)
    labels = read_signal_labels(labels_file)
    assert Counter(code for per in labels.values() for code, present in per.items() if present) == positives


def test_two_readings_of_the_held_out_set_agree_beyond_chance_on_every_signal():
    """The second reading was made without the first (analyst/data/signals/heldout/SOURCE.md): its
    positives, those of both, and Cohen's kappa per signal."""
    figures = label_agreement(read_signal_labels(HELDOUT_LABELS), read_signal_labels(HELDOUT_SECOND_READING))
    assert {code: (part["first"], part["second"], part["both"]) for code, part in figures.items()} == {
        "FRAUD-ID": (47, 41, 41), "HARASSMENT": (31, 27, 27), "URGENCY": (31, 30, 30), "MONEY-LOSS": (12, 13, 12),
        "TIME-LIMIT": (26, 22, 22), "MISCONDUCT": (75, 67, 67), "REPEAT-CONTACT": (80, 72, 71),
        "OLDER-AM": (10, 10, 9), "SCRA": (4, 4, 4), "MONEY-BACK": (28, 31, 28)}
    assert all(part["complaints"] == 200 and part["kappa"] >= 0.89 for part in figures.values())


def _label_agreement_script():
    spec = importlib.util.spec_from_file_location("label_agreement_script",
                                                  Path(__file__).resolve().parents[2] / "scripts" / "label_agreement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agreement_script_prints_the_table_or_says_what_is_wrong_with_its_input(tmp_path, capsys):
    script = _label_agreement_script()
    assert script.main([str(HELDOUT_LABELS), str(HELDOUT_SECOND_READING)]) == 0
    assert "REPEAT-CONTACT   200     80      72    71" in capsys.readouterr().out
    assert script.main([str(tmp_path / "missing.jsonl"), str(HELDOUT_LABELS)]) == 2
    assert "Could not read a labels file" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not json\n")
    assert script.main([str(tmp_path / "notes.txt"), str(HELDOUT_LABELS)]) == 2
    assert "Not a labels file" in capsys.readouterr().err
    assert script.main([str(HELDOUT_LABELS), str(HELDOUT2_LABELS)]) == 2
    assert "no complaint and signal in common" in capsys.readouterr().err


def test_agreement_is_counted_over_the_complaints_both_readings_judged():
    first = {"1": {"SCRA": True}, "2": {"SCRA": False}, "3": {"SCRA": False}, "4": {"SCRA": True}}
    second = {"1": {"SCRA": True}, "2": {"SCRA": True}, "3": {"SCRA": False}}
    scra = label_agreement(first, second)["SCRA"]
    # Over 1-3: observed 2/3; chance from rates 1/3 and 2/3: (1·2 + 2·1)/9 = 4/9; kappa (6/9 - 4/9)/(5/9).
    assert (scra["complaints"], scra["first"], scra["second"], scra["both"]) == (3, 1, 2, 1)
    assert scra["recall"] == 1.0 and scra["precision"] == 0.5 and scra["kappa"] == 0.4
    assert label_agreement(first, second)["URGENCY"]["complaints"] == 0


def test_recall_and_precision_per_signal_and_the_target():
    pairs = [({"FRAUD-ID": True, "SCRA": False}, {"FRAUD-ID"}),
             ({"FRAUD-ID": True, "SCRA": False}, {"SCRA"}),
             ({"FRAUD-ID": False, "SCRA": False}, set())]
    figures = signal_figures(pairs)
    assert figures["FRAUD-ID"] == {"complaints": 3, "labelled": 2, "flagged": 1, "found": 1, "recall": 0.5,
                                  "precision": 1.0, "meets_target": False}
    assert figures["SCRA"]["precision"] == 0.0 and figures["SCRA"]["recall"] is None and not figures["SCRA"]["meets_target"]
    assert figures["URGENCY"]["complaints"] == 0 and figures["URGENCY"]["meets_target"] is None  # nothing to count
    lines = format_narrative_signals({"complaints": 3, "targets": {"recall": 0.8, "precision": 0.7}, "signals": figures})
    assert any("(URGENCY)" in line and "nothing to measure here" in line for line in lines)


def test_money_back_is_triages_refund_request_and_the_report_names_misses():
    refund = Outcome(complaint_id="1", product="", issue="", tags=set(), signals={"MONEY-LOSS"}, request_kind="refund")
    other = Outcome(complaint_id="2", product="", issue="", tags=set(), request_kind="removal")
    assert raised_signals(refund) == {"MONEY-LOSS", "MONEY-BACK"} and raised_signals(other) == set()
    labels = {"1": {"MONEY-BACK": True, "MONEY-LOSS": False}, "2": {"MONEY-BACK": True, "MONEY-LOSS": False}}
    data = narrative_signal_report([refund, other, Outcome(complaint_id="3", product="", issue="", tags=set())], labels)
    assert data["complaints"] == 2
    assert data["signals"]["MONEY-BACK"]["missed"] == ["2"] and data["signals"]["MONEY-LOSS"]["false_alarms"] == ["1"]
    lines = format_narrative_signals(data)
    assert "money back requested (MONEY-BACK): recall 50.0% (1 of 2 labelled), precision 100.0% (1 of 1 flagged)" \
        in "\n".join(lines)
    assert format_narrative_signals(None) == ["Signals against the hand labels: no labels given."]


@pytest.mark.django_db
def test_evaluate_refuses_signal_labels_it_cannot_read_and_changes_nothing(tmp_path, case):
    broken = tmp_path / "labels.jsonl"
    broken.write_text('{"complaint_id": "1", "signal": "SCRA"}\n')
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        with pytest.raises(CommandError, match="Could not read the signal labels"):
            call_command("evaluate", str(taxonomy.DATA_FILE), "--signal-labels", str(tmp_path / "missing.jsonl"))
        with pytest.raises(CommandError, match="line 1 is not a signal label"):
            call_command("evaluate", str(taxonomy.DATA_FILE), "--signal-labels", str(broken))


def test_evaluate_needs_a_csv_unless_the_split_is_blind(case):
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        with pytest.raises(CommandError, match="may be left out only with --split heldout3, heldout2, heldout, blind"):
            call_command("evaluate")


@pytest.mark.parametrize(("flag", "value"), [("--limit", "0"), ("--run-seconds", "0"), ("--run-seconds", "-5")])
def test_evaluate_refuses_a_bound_below_one_and_changes_nothing(case, flag, value):
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        with pytest.raises(CommandError, match=f"{flag} must be at least 1"):
            call_command("evaluate", str(taxonomy.DATA_FILE), flag, value)


def test_evaluate_gives_each_analysis_the_time_asked_for(monkeypatch, case):
    seen = []
    monkeypatch.setattr("analyst.evaluation.drive_inline",
                        lambda **kwargs: seen.append(kwargs["timeout_seconds"]) or AgentRun.objects.get(pk=kwargs["run_id"]))
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        call_command("evaluate", str(taxonomy.DATA_FILE), "--limit", "1", "--run-seconds", "1800", stdout=StringIO())
    assert seen == [1800]


@pytest.mark.parametrize(("split", "rows", "labels", "signal", "expected"), [
    ("tuning", TUNING_ROWS, TUNING_LABELS, "HARASSMENT", 1), ("blind", BLIND_ROWS, BLIND_LABELS, "FRAUD-ID", 2),
    ("tuning2", TUNING2_ROWS, TUNING2_LABELS, "MISCONDUCT", 2)])
def test_evaluate_on_a_signal_set_reads_its_narratives_and_its_labels(tmp_path, case, split, rows, labels, signal,
                                                                       expected):
    out = tmp_path / f"{split}.json"
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        call_command("evaluate", "--split", split, "--limit", "2", "--json", str(out))
    data = json.loads(out.read_text())
    assert data["split"] == split and data["complaints"] == 2
    assert data["narrative_signals"]["complaints"] == 2  # judged against the set's own labels.jsonl
    first_two = sorted(rows)[:2]
    assert data["narrative_signals"]["signals"][signal]["labelled"] == sum(
        read_signal_labels(labels)[cid][signal] for cid in first_two) == expected
    # The shipped classifier learnt from these complaints (ADR 0036): the figures say so.
    assert data["triage_trained_on_these_complaints"] is True


@pytest.mark.parametrize("split", ["heldout", "heldout2", "heldout3"])
def test_evaluate_on_a_held_out_set_measures_complaints_the_classifier_never_saw(tmp_path, case, split):
    out, text = tmp_path / f"{split}.json", StringIO()
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        call_command("evaluate", "--split", split, "--limit", "1", "--json", str(out), stdout=text)
    assert "triage_trained_on_these_complaints" not in json.loads(out.read_text())
    assert "training figures" not in text.getvalue()


def test_evaluate_reports_the_notice_rubric_and_what_broke_it(monkeypatch, tmp_path, case):
    """A provider whose notice claims contact and quotes what the consumer never wrote: the rubric's
    counts say so, with the complaint and the text; the offline analyst's count nothing."""
    contact = {"subject": "Your complaint", "body": "Dear consumer, we have contacted your lender and we are working "
                                                   "with the company. You wrote “I was promised a full refund in cash”."}
    provider = FakeProvider({"notice_drafter": contact})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    out = tmp_path / "rubric.json"
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        call_command("evaluate", str(taxonomy.DATA_FILE), "--limit", "1", "--json", str(out), stdout=StringIO())
    rubric = json.loads(out.read_text())["notice_rubric"]
    assert rubric["analyses"] == 1 and set(rubric["counts"]) == set(RUBRIC_COUNTS)
    assert rubric["counts"]["implied contact"] >= 2 and rubric["counts"]["misquotes"] >= 1, rubric
    assert [fault["complaint_id"] for fault in rubric["faults"]] == [select_rows(read_rows(taxonomy.DATA_FILE),
                                                                                 limit=1)[0]["Complaint ID"]]
    assert any("we have contacted your lender" in text for text in rubric["faults"][0]["texts"])

    monkeypatch.undo()
    stdout = StringIO()
    call_command("evaluate", str(taxonomy.DATA_FILE), "--limit", "1", "--provider", "offline", "--json", str(out),
                 stdout=stdout)
    assert set(json.loads(out.read_text())["notice_rubric"]["counts"].values()) == {0}
    assert "Notice rubric over 1 analysis(es) (each must be 0): misquotes 0;" in stdout.getvalue()
    assert "[1/1] complaint " in stdout.getvalue() and " run completed in " in stdout.getvalue()


def test_a_taxonomy_label_is_no_claim_of_contact_but_the_sentence_around_it_can_be():
    assert implied_contact("Thank you for your complaint about dealing with your lender or servicer.") == 0
    assert implied_contact("We are working with your lender on dealing with your lender or servicer.") == 1
    assert implied_contact("We have contacted the company.") == 1


def test_a_consumers_capitals_quoted_verbatim_are_not_an_internal_code():
    """Read on the second held-out set (complaint 3289306): a rationale quoting "PLEASE CONDUCT A
    RE-INVESTIGATION" was counted as a code in a first paragraph. Quoted verbatim, they are the
    consumer's words; the same words outside quotation marks, or quoted but not in the evidence, count."""
    evidence = ["THE DISPUTED ACCOUNT DOES NOT BELONG TO ME, PLEASE CONDUCT A RE-INVESTIGATION INTO THIS MATTER."]
    first = "Risk high because of: identity theft. The evidence says: “PLEASE CONDUCT A RE-INVESTIGATION INTO THIS MATTER.”"
    assert not has_internal_code(ours(first, evidence))
    assert has_internal_code(ours("Risk high: FRAUD-ID. The evidence says: “PLEASE CONDUCT A RE-INVESTIGATION”", evidence))
    assert has_internal_code(ours("The evidence says: “ACK-15 applies”", evidence))  # not the consumer's words
    assert has_internal_code(ours("We will RE-INVESTIGATE.", evidence))


def test_a_failed_run_s_progress_line_says_why(analyst, monkeypatch):
    failing = FakeProvider({"triage": ProviderError("the model server refused the request (400)", retryable=False)})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: failing)
    stdout = StringIO()
    call_command("evaluate", str(taxonomy.DATA_FILE), "--limit", "1", stdout=stdout)
    line = next(text for text in stdout.getvalue().splitlines() if text.startswith("[1/1] complaint "))
    assert " run failed in " in line, stdout.getvalue()
    why = stdout.getvalue().split(line, 1)[1].splitlines()[1]
    assert why.startswith("    why: ") and "the model server refused the request (400)" in why, why
