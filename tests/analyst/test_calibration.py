"""Calibration of the offline analyst: the expected calibration error `evaluate` reports, the
temperature and smoothing fitted on the dev split, and never on test."""

from __future__ import annotations

import pytest

from analyst import classifier
from analyst.calibration import (
    expected_calibration_error,
    fit_issue_calibration,
    fit_temperature,
    reliability,
    sharpen,
    smooth,
)
from analyst.classifier import ComplaintClassifier, load_examples
from analyst.splits import split_of


def test_expected_calibration_error_over_ten_bins_by_hand():
    assert expected_calibration_error([]) is None
    # Nine right and one wrong at 0.9: exactly calibrated.
    assert expected_calibration_error([(0.9, True)] * 9 + [(0.9, False)]) == 0.0
    assert expected_calibration_error([(1.0, False)]) == 1.0
    # Two bins of two: 0.95 right once in two (gap 0.45), 0.25 never right (gap 0.25): (0.45 + 0.25) / 2.
    pairs = [(0.95, True), (0.95, False), (0.25, False), (0.25, False)]
    assert expected_calibration_error(pairs) == pytest.approx(0.35)
    assert [row["bin"] for row in reliability(pairs)] == ["0.2-0.3", "0.9-1.0"]


def test_the_temperature_softens_overconfidence_and_sharpens_underconfidence():
    overconfident = [({"a": 0.95, "b": 0.05}, "a")] * 6 + [({"a": 0.95, "b": 0.05}, "b")] * 4
    underconfident = [({"a": 0.55, "b": 0.45}, "a")] * 10
    assert fit_temperature(overconfident) > 1.0 > fit_temperature(underconfident)
    assert fit_temperature([]) == 1.0
    assert sharpen({"a": 0.6, "b": 0.4}, 1.0) == pytest.approx({"a": 0.6, "b": 0.4})


def test_smoothing_spreads_probability_over_the_published_labels():
    smoothed = smooth({"only": 1.0}, 0.1, ["only", "other", "third"])
    assert sum(smoothed.values()) == pytest.approx(1.0)
    assert smoothed["only"] == pytest.approx(1.1 / 1.3) and smoothed["other"] == pytest.approx(0.1 / 1.3)
    # A product seen with one issue only, wrong half the time, is not answered with certainty.
    triples = [({"only": 1.0}, "only", ("only", "other")), ({"only": 1.0}, "other", ("only", "other"))]
    _, epsilon = fit_issue_calibration(triples)
    assert epsilon > 0


@pytest.fixture(scope="module")
def examples():
    return load_examples()


def test_the_classifier_is_calibrated_on_dev_and_never_reads_test(examples, monkeypatch):
    seen: list[str] = []
    original = ComplaintClassifier.calibrate_on

    def record(self, calibration):
        seen.extend(e.complaint_id for e in calibration)
        return original(self, calibration)

    monkeypatch.setattr(ComplaintClassifier, "calibrate_on", record)
    train = [e for e in examples if split_of(e.complaint_id) == "train"]
    model = classifier._fit(train, dev=[e for e in examples if split_of(e.complaint_id) == "dev"])
    assert seen and {split_of(complaint_id) for complaint_id in seen} == {"dev"}
    # The shipped model (all rows) takes the temperatures fitted on dev by a train-only model.
    seen.clear()
    shipped = classifier._fit(examples)
    assert {split_of(complaint_id) for complaint_id in seen} == {"dev"}
    assert (shipped.temperature, shipped.issue_temperature, shipped.issue_smoothing) == \
        (model.temperature, model.issue_temperature, model.issue_smoothing)
    assert model.temperature != 1.0 or model.issue_temperature != 1.0


def test_the_narrative_and_the_company_prior_are_given_apart(examples):
    train = [e for e in examples if split_of(e.complaint_id) == "train"]
    model = ComplaintClassifier(train, calibrate=False)
    student = next(e for e in train if e.product == "Student loan")
    views = model.product_views(student.text, "EQUIFAX, INC.")
    assert max(views["narrative"], key=views["narrative"].get) == "Student loan"
    assert views["company"] and max(views["company"], key=views["company"].get).startswith("Credit reporting")
    assert sum(views["combined"].values()) == pytest.approx(1.0)
    # The combination is what triage answers; an unknown respondent gives no prior at all.
    assert views["combined"] == model.product_probabilities(student.text, "EQUIFAX, INC.")
    assert model.product_views(student.text, "A company nobody knows")["company"] == {}
