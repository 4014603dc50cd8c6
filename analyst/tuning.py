"""Choosing the classifier's weights without the test split.

`python -m analyst.tuning` measures the product and issue classifier alone (no database, no
agents) on the complaints of the train and dev splits ONLY — the test split is dropped before
anything is read from it — in two ways:

- train → dev: trained on train, scored on dev, exactly as `manage.py evaluate --split dev` does;
- cross-validation over train + dev: K folds (by a hash of the complaint id, several seeds), every
  complaint predicted once per seed by a model that never saw it, pooled. With one or two
  examples of the rare products, this is the only way to see how a product the model has never
  seen (its one example held out) is named from its cue words and the respondent's line of business.

The weights in classifier.py were chosen by these figures; `manage.py evaluate --split test`
reports the held-out figure (see docs/adr/0011).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable

from agents import taxonomy
from analyst.classifier import ComplaintClassifier, Example, load_examples
from analyst.splits import split_of

FOLDS = 5
SEEDS = (1, 2, 3)


def classifier_text(example: Example) -> str:
    """What triage gives the classifier: the case title (complaint id and company) and the narrative."""
    title = f"CFPB complaint {example.complaint_id}" + (f" — {example.company}" if example.company else "")
    return f"{title} {example.text}"


def tuning_examples() -> dict[str, list[Example]]:
    """train and dev examples; test rows are never returned."""

    sides: dict[str, list[Example]] = {"train": [], "dev": []}
    for example in load_examples():
        side = split_of(example.complaint_id)
        if side in sides:
            sides[side].append(example)
    return sides


def _fold(complaint_id: str, seed: int, folds: int) -> int:
    return int(hashlib.sha256(f"tuning-{seed}:{complaint_id}".encode()).hexdigest()[:8], 16) % folds


def _label_figures(pairs: list[tuple[str, str]]) -> dict:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for truth, predicted in pairs:
        per[truth][1] += 1
        per[truth][0] += int(truth == predicted)
    recalls = {label: hit / total for label, (hit, total) in per.items()}
    return {"n": len(pairs), "accuracy": sum(t == p for t, p in pairs) / len(pairs),
            "macro_recall": sum(recalls.values()) / len(recalls),
            "per_label": {label: f"{hit}/{total}" for label, (hit, total) in sorted(per.items())}}


def figures(pairs: list[tuple[Example, dict]]) -> dict:
    products = _label_figures([(e.product, p["product"].label) for e, p in pairs])
    issues = _label_figures([(e.issue, p["issue"].label) for e, p in pairs])
    # Issue accuracy when the product is right (the issue model's own share of the errors).
    right = [(e, p) for e, p in pairs if p["product"].label == e.product]
    issues["accuracy_when_product_right"] = sum(p["issue"].label == e.issue for e, p in right) / max(len(right), 1)
    by_product: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for example, prediction in pairs:
        by_product[example.product][1] += 1
        by_product[example.product][0] += int(prediction["issue"].label == example.issue)
    issues["within_product"] = {label: f"{hit}/{total}" for label, (hit, total) in sorted(by_product.items())}
    return {"product": products, "issue": issues}


def _predict(model: ComplaintClassifier, example: Example) -> dict:
    return model.predict(classifier_text(example), example.company, example.received)


def train_dev(build: Callable[[list[Example]], ComplaintClassifier] | None = None) -> dict:
    build = build or (lambda examples: ComplaintClassifier(examples, calibrate=False))
    sides = tuning_examples()
    model = build(sides["train"])
    return figures([(e, _predict(model, e)) for e in sides["dev"]])


def cross_validate(build: Callable[[list[Example]], ComplaintClassifier] | None = None, *,
                   folds: int = FOLDS, seeds: tuple[int, ...] = SEEDS) -> dict:
    build = build or (lambda examples: ComplaintClassifier(examples, calibrate=False))
    sides = tuning_examples()
    examples = sides["train"] + sides["dev"]
    pairs = []
    for seed in seeds:
        for fold in range(folds):
            train = [e for e in examples if _fold(e.complaint_id, seed, folds) != fold]
            held = [e for e in examples if _fold(e.complaint_id, seed, folds) == fold]
            if held:
                model = build(train)
                pairs.extend((e, _predict(model, e)) for e in held)
    return figures(pairs)


def summary(result: dict) -> str:
    product, issue = result["product"], result["issue"]
    return (f"product {product['accuracy']:.1%} macro {product['macro_recall']:.1%} | issue {issue['accuracy']:.1%}"
            f" (product right: {issue['accuracy_when_product_right']:.1%}) n={product['n']}")


def main() -> None:  # pragma: no cover - a maintenance script
    for name, result in (("train → dev", train_dev()), ("cross-validation (train + dev)", cross_validate())):
        print(f"{name}: {summary(result)}")
        print("    product recall:", result["product"]["per_label"])
        print("    issue within product:", result["issue"]["within_product"])
    print("Products:", Counter(taxonomy.current_product(e.product) for side in tuning_examples().values()
                                for e in side))


if __name__ == "__main__":  # pragma: no cover
    main()
