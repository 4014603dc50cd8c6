"""The classifier alone on the fixed evaluation split: held-out accuracy of product and issue
against the majority-class baseline (`manage.py evaluate` measures the whole analysis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from analyst.classifier import ComplaintClassifier
from analyst.examples import Example, load_examples
from analyst.splits import split_of


def holdout_split(examples: list[Example]) -> tuple[list[Example], list[Example]]:
    """The train and test sides of the fixed evaluation split (analyst.evaluation.split_of, a hash of
    the complaint id); the dev side, used for tuning, is in neither."""
    ordered = sorted(examples, key=lambda e: (e.complaint_id, e.text[:40]))
    return ([e for e in ordered if split_of(e.complaint_id) == "train"],
            [e for e in ordered if split_of(e.complaint_id) == "test"])


@dataclass(frozen=True)
class Evaluation:
    train_size: int
    test_size: int
    product_accuracy: float
    product_baseline: float
    issue_accuracy: float
    issue_baseline: float


def evaluate(examples: list[Example] | None = None) -> Evaluation:
    """Held-out accuracy of product and issue against the majority-class baseline (the classifier
    alone; `manage.py evaluate` measures the whole analysis)."""
    examples = examples if examples is not None else load_examples()
    train, test = holdout_split(examples)
    model = ComplaintClassifier(train)
    predictions = [model.predict(e.text, e.company, e.received) for e in test]
    majority_product = Counter(e.product for e in train).most_common(1)[0][0]
    majority_issue = Counter(e.issue for e in train).most_common(1)[0][0]
    n = len(test)
    return Evaluation(
        train_size=len(train), test_size=n,
        product_accuracy=sum(p["product"].label == e.product for p, e in zip(predictions, test, strict=True)) / n,
        product_baseline=sum(e.product == majority_product for e in test) / n,
        issue_accuracy=sum(p["issue"].label == e.issue for p, e in zip(predictions, test, strict=True)) / n,
        issue_baseline=sum(e.issue == majority_issue for e in test) / n,
    )
