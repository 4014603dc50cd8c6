"""Product / sub-product / issue classifier of the offline analyst.

TF-IDF over word 1–2-grams + multinomial logistic regression (fixed random_state), trained on
the CFPB complaint sample shipped in runs/data/ at first use. Sub-product and issue predictions
are restricted to labels seen with the predicted product, so the three answers stay coherent.

Caching: in-process (one model per data-file hash) and on disk under
settings.VAR_DIR/models/, keyed by the data file's sha256 and the scikit-learn version, written
atomically (temp file + rename) so two workers training at once cannot leave a torn file. A file
that fails to load is ignored and retrained. Nothing is ever downloaded.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import pickle
import tempfile
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from runs.offline.text import clean_narrative

logger = logging.getLogger(__name__)

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "cfpb_complaints.csv"
RANDOM_STATE = 20261101
MODEL_FORMAT = 2  # bump when the training configuration or the pickled structure changes


@dataclass(frozen=True)
class Example:
    complaint_id: str
    text: str
    product: str
    sub_product: str
    issue: str


@dataclass(frozen=True)
class Prediction:
    label: str
    confidence: float


def load_examples(path: Path = DATA_FILE) -> list[Example]:
    """Rows with a narrative, in file order (the bytes-literal narrative decoded)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    examples = []
    for row in rows:
        text = clean_narrative(row.get("Consumer complaint narrative"))
        if not text or not row.get("Product"):
            continue
        examples.append(Example(
            complaint_id=row.get("Complaint ID", ""),
            text=text,
            product=row["Product"].strip(),
            sub_product=(row.get("Sub-product") or "").strip(),
            issue=(row.get("Issue") or "").strip(),
        ))
    return examples


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _vectorizer() -> TfidfVectorizer:
    # CFPB scrubbing marks (XXXX, XX/XX/2019) carry no signal; tokens need a letter.
    return TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=1, sublinear_tf=True,
                           stop_words="english", token_pattern=r"(?u)\b(?!x+\b)[a-z][a-z0-9']+\b",
                           max_features=3000)


def _regression() -> LogisticRegression:
    # newton-cg: exact and deterministic, and several times faster than lbfgs on this sparse,
    # many-class problem (about 1.5 s for the three label models on a busy 2-core machine).
    return LogisticRegression(C=10.0, solver="newton-cg", max_iter=300, random_state=RANDOM_STATE)


class _LabelModel:
    """One label column: a logistic regression, or a constant when the column has one value."""

    def __init__(self, features, labels: list[str]):
        self.classes = sorted(set(labels))
        self.model = None
        if len(self.classes) > 1:
            self.model = _regression().fit(features, labels)
            self.classes = list(self.model.classes_)

    def probabilities(self, features) -> np.ndarray:
        if self.model is None:
            return np.ones((features.shape[0], 1))
        return self.model.predict_proba(features)


class ComplaintClassifier:
    def __init__(self, examples: list[Example]):
        if not examples:
            raise ValueError("The complaint classifier needs at least one training example.")
        self.vectorizer = _vectorizer()
        features = self.vectorizer.fit_transform([e.text for e in examples])
        self.product = _LabelModel(features, [e.product for e in examples])
        self.sub_product = _LabelModel(features, [e.sub_product for e in examples])
        self.issue = _LabelModel(features, [e.issue for e in examples])
        # Which sub-products / issues occur with each product in the training data.
        self.allowed: dict[str, dict[str, set[str]]] = {"sub_product": {}, "issue": {}}
        for example in examples:
            self.allowed["sub_product"].setdefault(example.product, set()).add(example.sub_product)
            self.allowed["issue"].setdefault(example.product, set()).add(example.issue)
        self.label_counts = Counter(e.product for e in examples)
        self.trained_on = len(examples)

    # --- prediction -------------------------------------------------------------------------
    def _best(self, model: _LabelModel, row: np.ndarray, allowed: set[str] | None = None) -> Prediction:
        scores = row.copy()
        if allowed is not None:
            mask = np.array([label in allowed for label in model.classes])
            if mask.any():
                scores = np.where(mask, scores, 0.0)
                scores = scores / scores.sum() if scores.sum() > 0 else scores
        index = int(np.argmax(scores))  # ties resolve to the first class (sorted): deterministic
        return Prediction(label=model.classes[index], confidence=round(float(scores[index]), 4))

    def predict(self, text: str) -> dict[str, Prediction]:
        features = self.vectorizer.transform([text])
        product = self._best(self.product, self.product.probabilities(features)[0])
        sub_product = self._best(self.sub_product, self.sub_product.probabilities(features)[0],
                                 self.allowed["sub_product"].get(product.label))
        issue = self._best(self.issue, self.issue.probabilities(features)[0],
                           self.allowed["issue"].get(product.label))
        return {"product": product, "sub_product": sub_product, "issue": issue}

    def predict_products(self, texts: list[str]) -> list[str]:
        probabilities = self.product.probabilities(self.vectorizer.transform(texts))
        return [self.product.classes[int(np.argmax(row))] for row in probabilities]

    def predict_issues(self, texts: list[str]) -> list[str]:
        return [self.predict(text)["issue"].label for text in texts]

    def idf(self) -> dict[str, float]:
        """Inverse document frequency of each unigram over the complaint sample (for summaries)."""
        vocabulary = self.vectorizer.vocabulary_
        weights = self.vectorizer.idf_
        return {term: float(weights[index]) for term, index in vocabulary.items() if " " not in term}


# --- caching --------------------------------------------------------------------------------
_lock = threading.Lock()
_cache: dict[str, ComplaintClassifier] = {}


def _cache_file(digest: str) -> Path | None:
    from django.conf import settings

    var_dir = getattr(settings, "VAR_DIR", None)
    if not var_dir:
        return None
    name = f"offline-classifier-v{MODEL_FORMAT}-{digest[:24]}-sklearn{sklearn.__version__}.pickle"
    return Path(var_dir) / "models" / name


def _load_from_disk(path: Path) -> ComplaintClassifier | None:
    # The file is written only by this module into the project's own var directory; it is not
    # a file anyone uploads. A corrupt or incompatible file is ignored and replaced.
    try:
        with open(path, "rb") as handle:
            model = pickle.load(handle)  # noqa: S301 - our own artefact, see above
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - any unreadable cache means "retrain"
        logger.warning("Ignoring unreadable classifier cache %s; retraining.", path, exc_info=True)
        return None
    return model if isinstance(model, ComplaintClassifier) else None


def _save_to_disk(path: Path, model: ComplaintClassifier) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-classifier-")
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(model, stream, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)  # atomic: a concurrent reader sees the old file or the new one
    except OSError:
        logger.warning("Could not write classifier cache %s; continuing in memory.", path, exc_info=True)


_digests: dict[tuple[str, int, int], str] = {}


def _digest_of(path: Path) -> str:
    """The data file's sha256, re-read only when its size or modification time changes."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_sha256(path)
    return _digests[key]


_scope = threading.local()


@contextmanager
def training_scope(splits: tuple[str, ...]):
    """Within the block, get_classifier() trains on the rows of these evaluation splits only
    (runs.evaluation.split_of), so `manage.py evaluate` never scores a complaint it trained on."""
    previous = getattr(_scope, "splits", None)
    _scope.splits = tuple(splits)
    try:
        yield
    finally:
        _scope.splits = previous


def _examples_in_scope(path: Path) -> list[Example]:
    splits = getattr(_scope, "splits", None)
    examples = load_examples(path)
    if not splits:
        return examples
    from runs.evaluation import split_of

    return [e for e in examples if split_of(e.complaint_id) in splits]


def get_classifier(path: Path = DATA_FILE, *, use_disk_cache: bool = True) -> ComplaintClassifier:
    """The trained classifier for `path`, trained once per process (and per data-file content
    and training scope)."""
    splits = getattr(_scope, "splits", None)
    digest = _digest_of(path)[:24] + (f"-{'+'.join(splits)}" if splits else "")
    with _lock:
        model = _cache.get(digest)
        if model is not None:
            return model
        cache_file = _cache_file(digest) if use_disk_cache else None
        model = _load_from_disk(cache_file) if cache_file else None
        if model is None:
            model = ComplaintClassifier(_examples_in_scope(path))
            if cache_file:
                _save_to_disk(cache_file, model)
        _cache[digest] = model
        return model


def clear_cache() -> None:
    with _lock:
        _cache.clear()


# --- evaluation -----------------------------------------------------------------------------
def holdout_split(examples: list[Example], every: int = 4) -> tuple[list[Example], list[Example]]:
    """Deterministic split: every `every`-th example (ordered by complaint id) is held out.
    Labels seen only once stay in training, so every held-out label was learnable."""
    ordered = sorted(examples, key=lambda e: (e.complaint_id, e.text[:40]))
    counts = Counter(e.product for e in ordered)
    train, test = [], []
    for position, example in enumerate(ordered):
        if position % every == every - 1 and counts[example.product] > 1:
            test.append(example)
        else:
            train.append(example)
    return train, test


@dataclass(frozen=True)
class Evaluation:
    train_size: int
    test_size: int
    product_accuracy: float
    product_baseline: float
    issue_accuracy: float
    issue_baseline: float


def evaluate(examples: list[Example] | None = None, every: int = 4) -> Evaluation:
    """Held-out accuracy of product and issue against the majority-class baseline."""
    examples = examples if examples is not None else load_examples()
    train, test = holdout_split(examples, every)
    model = ComplaintClassifier(train)
    texts = [e.text for e in test]
    products = model.predict_products(texts)
    issues = model.predict_issues(texts)
    majority_product = Counter(e.product for e in train).most_common(1)[0][0]
    majority_issue = Counter(e.issue for e in train).most_common(1)[0][0]
    n = len(test)
    return Evaluation(
        train_size=len(train), test_size=n,
        product_accuracy=sum(p == e.product for p, e in zip(products, test, strict=True)) / n,
        product_baseline=sum(e.product == majority_product for e in test) / n,
        issue_accuracy=sum(p == e.issue for p, e in zip(issues, test, strict=True)) / n,
        issue_baseline=sum(e.issue == majority_issue for e in test) / n,
    )
