"""Calibration of the offline analyst's confidences, and how it is measured.

A stated confidence should be right that often: of the complaints triaged at 0.7, about 70% should
have the product right. The classifier's raw probabilities are sharpened or softened by one
temperature per label column (product, issue), chosen to minimise the log-loss of the predictions
a model trained on the train split makes on the **dev** split (never on test, which only
`manage.py evaluate` reads). Issues get one more parameter: a share of probability spread over
every issue the CFPB publishes for the product (`smooth`), so a product the training data shows
with a single issue does not answer it with certainty; both are fitted together on dev. `expected_calibration_error` is the figure `evaluate` reports: over
10 equal-width confidence bins, the share of complaints in a bin times the gap between the bin's
mean confidence and its accuracy, summed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

TEMPERATURES = tuple(round(0.3 + 0.1 * step, 2) for step in range(48))  # 0.3 … 5.0
SMOOTHINGS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
ECE_BINS = 10


def sharpen(probabilities: dict[str, float], temperature: float) -> dict[str, float]:
    """p_i^(1/T), normalised: T > 1 softens, T < 1 sharpens; the order of the labels is kept."""
    if not probabilities:
        return {}
    logs = {label: math.log(max(p, 1e-12)) / temperature for label, p in probabilities.items()}
    top = max(logs.values())
    weights = {label: math.exp(value - top) for label, value in logs.items()}
    total = sum(weights.values())
    return {label: weight / total for label, weight in weights.items()}


def smooth(probabilities: dict[str, float], epsilon: float, labels: Iterable[str] = ()) -> dict[str, float]:
    """(p + ε) / (1 + ε·K) over the K labels of `probabilities` and `labels` together (a label the
    model never learnt gets ε / (1 + ε·K))."""
    every = set(probabilities) | set(labels)
    if not epsilon or not every:
        return dict(probabilities)
    total = 1 + epsilon * len(every)
    return {label: (probabilities.get(label, 0.0) + epsilon) / total for label in every}


def fit_issue_calibration(triples: list[tuple[dict[str, float], str, tuple[str, ...]]]) -> tuple[float, float]:
    """(temperature, smoothing) with the least log-loss on (probabilities, true label, the product's
    published issues) triples; (1.0, 0.0) when there is nothing to fit on."""
    triples = [t for t in triples if t[0]]
    if not triples:
        return 1.0, 0.0

    def loss(temperature: float, epsilon: float) -> float:
        return -sum(math.log(max(smooth(sharpen(p, temperature), epsilon, labels).get(truth, 0.0), 1e-9))
                    for p, truth, labels in triples)

    grid = [(t, e) for t in TEMPERATURES for e in SMOOTHINGS]
    return min(grid, key=lambda pair: (round(loss(*pair), 9), pair))


def log_loss(pairs: Iterable[tuple[dict[str, float], str]], temperature: float) -> float:
    return -sum(math.log(max(sharpen(probabilities, temperature).get(truth, 0.0), 1e-9))
                for probabilities, truth in pairs)


def fit_temperature(pairs: list[tuple[dict[str, float], str]]) -> float:
    """The temperature (of TEMPERATURES) with the least log-loss on (probabilities, true label)
    pairs; 1.0 (no change) when there is nothing to fit on."""
    pairs = [(probabilities, truth) for probabilities, truth in pairs if probabilities]
    if not pairs:
        return 1.0
    return min(TEMPERATURES, key=lambda t: (round(log_loss(pairs, t), 9), t))


def reliability(pairs: list[tuple[float, bool]], bins: int = ECE_BINS) -> list[dict]:
    """Per non-empty bin of confidence [k/bins, (k+1)/bins): its count, mean confidence and accuracy."""
    grouped: dict[int, list[tuple[float, bool]]] = {}
    for confidence, correct in pairs:
        index = min(int(max(confidence, 0.0) * bins), bins - 1)
        grouped.setdefault(index, []).append((confidence, correct))
    rows = []
    for index in sorted(grouped):
        members = grouped[index]
        rows.append({"bin": f"{index / bins:.1f}-{(index + 1) / bins:.1f}", "n": len(members),
                     "confidence": round(sum(c for c, _ in members) / len(members), 4),
                     "accuracy": round(sum(ok for _, ok in members) / len(members), 4)})
    return rows


def expected_calibration_error(pairs: list[tuple[float, bool]], bins: int = ECE_BINS) -> float | None:
    """Σ over bins of (n_bin / n) · |mean confidence − accuracy|; None without pairs."""
    if not pairs:
        return None
    total = len(pairs)
    return round(sum(row["n"] / total * abs(row["confidence"] - row["accuracy"])
                     for row in reliability(pairs, bins)), 4)
