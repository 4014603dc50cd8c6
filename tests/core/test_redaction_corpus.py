"""The redactor measured on the labelled corpus (tests/data/redaction_corpus.jsonl): recall of
marked personal data at least 98%, lines without personal data changed at most 2%."""

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.redaction_corpus import Report, evaluate, load_corpus, parse_line

CORPUS = Path(__file__).resolve().parent.parent / "data" / "redaction_corpus.jsonl"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(CORPUS)


def test_the_corpus_has_enough_lines_of_each_kind(corpus):
    personal = [example for example in corpus if example.personal]
    clean = [example for example in corpus if not example.personal]
    assert len(personal) >= 200 and len(clean) >= 200
    categories = {example.category for example in personal}
    assert categories == {"phone", "account number", "email", "card", "address", "date of birth", "ssn"}
    assert all(sum(1 for e in personal if e.category == c) >= 30 for c in categories)


def test_recall_and_false_positives_meet_the_targets(corpus):
    report = evaluate(corpus)
    recall, false_positives = Report.overall(report.recall), Report.overall(report.false_positives)
    assert recall.total >= 200 and false_positives.total >= 200
    assert recall.rate >= 0.98, report.missed
    assert false_positives.rate <= 0.02, report.changed
    assert all(tally.rate >= 0.9 for tally in report.recall.values()), report.missed


def test_a_span_counts_only_when_removed_whole():
    # The redactor leaves "1234" of a made-up format alone: the marked span is missed, not half-hit.
    example = parse_line({"personal": True, "category": "x", "text": "code ⟦ZZ-1234⟧ here"})
    assert example.text == "code ZZ-1234 here" and example.spans == ((5, 12),)
    report = evaluate([example])
    assert Report.overall(report.recall).hits == 0 and report.missed == [("x", "ZZ-1234", "code ZZ-1234 here")]


def test_a_line_marked_personal_without_a_span_is_refused():
    with pytest.raises(ValueError):
        parse_line({"personal": True, "category": "phone", "text": "no marks here"})


def test_the_report_command_prints_the_figures():
    out = StringIO()
    call_command("redaction_report", stdout=out)
    text = out.getvalue()
    assert re.search(r"Recall: \d+\.\d% \(\d+ of \d+ marked spans removed", text), text
    assert "False positives:" in text and "  phone" in text and "  money" in text


def test_the_report_command_refuses_a_missing_or_broken_corpus(tmp_path):
    with pytest.raises(CommandError, match="No corpus"):
        call_command("redaction_report", corpus=str(tmp_path / "absent.jsonl"), stdout=StringIO())
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"personal": True, "category": "phone", "text": "no marks"}) + "\n")
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("redaction_report", corpus=str(broken), stdout=StringIO())
