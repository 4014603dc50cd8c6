"""What the shipped classifier learns from (its sample and the signal sets' complaints, never the
held-out set's), and how it reads the held-out complaints that no model saw (docs/adr/0036)."""

from __future__ import annotations

from analyst import classifier, signal_sets
from analyst.calibration import expected_calibration_error
from analyst.examples import DATA_FILE, load_examples
from analyst.splits import split_of
from analyst.tuning import classifier_text

HELDOUT = load_examples(signal_sets.HELDOUT_CSV)


def test_the_classifier_learns_from_the_sample_and_the_signal_sets_but_never_a_held_out_narrative():
    sample = load_examples(DATA_FILE)
    extra = signal_sets.classifier_examples()
    texts = [e.text for e in extra]
    assert len(sample) == 191 and len(extra) == 628 and len(set(texts)) == len(texts)
    assert not set(texts) & {e.text for e in HELDOUT} and not set(texts) & {e.text for e in sample}
    sets = {e.complaint_id for path in signal_sets.CLASSIFIER_SETS for e in load_examples(path)}
    assert {e.complaint_id for e in extra} <= sets
    # The shipped model takes them all; a model for evaluating the sample's test side none of its split.
    assert len(classifier._examples_of(DATA_FILE, None)) == 191 + 628
    scoped = classifier._examples_of(DATA_FILE, ("train",))
    assert scoped and all(split_of(e.complaint_id) == "train" for e in scoped)
    assert {e.complaint_id for e in extra if split_of(e.complaint_id) == "train"} <= {e.complaint_id for e in scoped}


def test_another_file_trains_on_its_own_rows_only(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(DATA_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    assert len(classifier._examples_of(path, None)) == 191


def test_the_shipped_classifier_reads_the_held_out_complaints_at_its_measured_figures(shipped_classifier):
    model = classifier.load_artifact(shipped_classifier)
    products, issues, confidences = 0, 0, []
    for example in HELDOUT:
        prediction = model.predict(classifier_text(example), example.company, example.received)
        right = prediction["product"].label == example.product
        products += right
        issues += prediction["issue"].label == example.issue
        confidences.append((prediction["product"].confidence, right))
    # 77.0% and 40.0%, as evaluate --split heldout reports them (its product ECE 0.085). Trained on
    # the sample only it read 149 products and 62 issues of these 200, with ECE 0.19.
    # The issue count depends on the machine, not only on the code: the same commit, data and pinned
    # libraries read 80 issues on the VMs where it was measured and 81 on a VM without AVX-512 (AMD
    # Zen 3), in every process there. Neither the hash seed, OpenMP's thread count, OpenBLAS's kernel
    # (Haswell or Katmai), numpy without AVX2/FMA, nor changing C by 3e-7 moved it on that VM; five
    # held-out issues are within 0.0025 of their runner-up, and numpy's AVX-512 loops (used where the
    # CPU has them) are the difference left. So the figure may move by that one complaint, no more.
    assert (len(HELDOUT), products) == (200, 154)
    assert issues in (80, 81)
    assert expected_calibration_error(confidences) < 0.11
