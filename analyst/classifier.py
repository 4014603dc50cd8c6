"""Product / sub-product / issue classifier of the offline analyst.

TF-IDF over word 1–2-grams + multinomial logistic regression (fixed random_state), trained on
the CFPB complaint sample shipped in analyst/data/. Sub-product and issue predictions are
restricted to labels seen with the predicted product, so the three answers stay coherent. The
artifact also carries the narrative signals' sentence reader (analyst.signal_reader), trained with it.

Trained once, outside any run (`manage.py train_analyst`, or classifier_train_task when a step
finds none), into a versioned artifact under settings.ARBITER_ANALYST_DIR named by the data file's
sha256 and the training code's version; steps only load it (milliseconds) and keep it in memory.
Nothing is ever downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import math
import os
import pickle
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import sklearn
from django.conf import settings
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from agents import taxonomy
from agents import text as text_module
from analyst import cues as cues_module
from analyst import examples as examples_module
from analyst import signal_reader as reader_module
from analyst import signal_sets
from analyst.calibration import fit_issue_calibration, fit_temperature, sharpen, smooth
from analyst.cues import company_lines, product_cues
from analyst.examples import DATA_FILE, Example, file_sha256, load_examples
from analyst.signal_reader import SentenceReader
from analyst.splits import split_of
from config.celery import app as celery_app
from runs.providers import ProviderError

logger = logging.getLogger(__name__)

# One BLAS thread for the whole process, from the moment the analyst's numeric code is loaded.
# OpenBLAS otherwise starts a thread per core and its threads spin while they wait: training the
# classifier took 8.6 s and 12.0 s of CPU with them on the 2-core machine, 6.6 s and 6.0 s of CPU on
# one thread; the fitting is sparse matrix work that BLAS threads do not speed up. In a worker or a
# test run with other processes beside it, the spinning took CPU from them too.
threadpool_limits(limits=1, user_api="blas")

RANDOM_STATE = 20261101
MODEL_FORMAT = 10  # bump when the training configuration or the pickled structure changes


@dataclass(frozen=True)
class Prediction:
    label: str
    confidence: float


def _vectorizer() -> TfidfVectorizer:
    # CFPB scrubbing marks (XXXX, XX/XX/2019) carry no signal; tokens need a letter.
    return TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=1, sublinear_tf=True,
                           stop_words="english", token_pattern=r"(?u)\b(?!x+\b)[a-z][a-z0-9']+\b",
                           max_features=3000)


def _regression(*, balanced: bool = True, c: float = 10.0) -> LogisticRegression:
    # newton-cg: exact and deterministic, and several times faster than lbfgs on this sparse,
    # many-class problem. class_weight="balanced": a rare product counts as much as the student
    # loans that make up two thirds of the sample, so the majority class is not the default answer.
    return LogisticRegression(C=c, solver="newton-cg", max_iter=300, random_state=RANDOM_STATE,
                              class_weight="balanced" if balanced else None)


# Chosen by cross-validation on the train + dev splits (analyst/tuning.py; never on test), in the
# middle of the plateau (cue weight 2.25–2.75, company weight 1–1.25, line pseudo-complaints 10–40 all give
# 96.3% product accuracy and 95.6% macro recall out of fold): the weight of one distinct product cue
# (cues.py, at most CUE_CAP counted) and of the respondent's complaint mix, added to the text model's
# log-probability.
CUE_WEIGHT = 2.5
COMPANY_WEIGHT = 1.25
COMPANY_SMOOTHING = 2.0  # pseudo-complaints spread over all products before a company's own mix
LINE_PSEUDO = 20.0  # pseudo-complaints of a respondent's known line(s) of business (cues.company_lines)
CUE_CAP = 2  # distinct cues counted per product at most (0: all)
# Inverse regularisation strength of the issue models (the product model keeps C=10): chosen by
# cross-validation on train + dev (analyst/tuning.py): 2.0 tells "Struggling to repay" from "Dealing
# with your lender" among student loans better than 10 (68.5% against 67.0% of them).
ISSUE_C = 2.0
# A product absent from training: the text model has no opinion, so it scores the log of
# UNSEEN_PRIOR / (number of products) and its cue words decide (0: it scores like an improbable one).
UNSEEN_PRIOR = 1.0
FLOOR = 1e-3  # probability floor of the text model (a product it never saw is not impossible)
# A confidence is never certainty: a model of 191 complaints that says 1.00 overclaims (and a
# threshold of 1.0 must still send every triage to an analyst).
MAX_CONFIDENCE = 0.999


def normalise_company(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", (name or "").lower()).strip()


class _LabelModel:
    """One label column: a logistic regression, or a constant when the column has one value."""

    def __init__(self, features, labels: list[str], *, balanced: bool = True, c: float = 10.0):
        self.classes = sorted(set(labels))
        self.model = None
        if len(self.classes) > 1:
            self.model = _regression(balanced=balanced, c=c).fit(features, labels)
            self.classes = list(self.model.classes_)

    def probabilities(self, features) -> np.ndarray:
        if self.model is None:
            return np.ones((features.shape[0], 1))
        return self.model.predict_proba(features)


class ComplaintClassifier:
    """Product, sub-product and issue of a complaint, answering only with taxonomy labels.

    Product: a log-linear combination, each part checkable by hand —
        score(p) = log P_text(p) + CUE_WEIGHT · min(distinct cues of p, CUE_CAP)
                   + COMPANY_WEIGHT · log P(p | company)
    where P_text is the class-balanced TF-IDF logistic regression, the cues are words of the CFPB
    taxonomy naming the product (cues.PRODUCT_CUES) and P(p | company) is the respondent's complaint
    mix: its complaints in the training data plus LINE_PSEUDO pseudo-complaints spread over its
    publicly known lines of business (cues.company_lines), smoothed. The first two terms are the
    narrative's own reading, the last the company prior: each is also given apart
    (`product_views`), so triage can say when they disagree. The scores become probabilities with
    a temperature; product and issue temperatures are fitted on the dev split (`calibrate_on`,
    analyst/calibration.py): a stated 0.7 is right about 70% of the time.
    Issue and sub-product: the same regression, restricted to the labels the taxonomy allows
    for the product in force on the received date."""

    def __init__(self, examples: list[Example], *, calibrate: bool = True, issues: bool = True,
                 calibration: list[Example] | None = None):
        if not examples:
            raise ValueError("The complaint classifier needs at least one training example.")
        self.vectorizer = _vectorizer()
        features = self.vectorizer.fit_transform([e.text for e in examples])
        self.product = _LabelModel(features, [taxonomy.current_product(e.product) for e in examples])
        # The calibration folds need the product model only.
        self.sub_product = _LabelModel(features, [e.sub_product for e in examples] if issues else [""])
        self.issue = _LabelModel(features, [e.issue for e in examples] if issues else [""], c=ISSUE_C)
        # Issues are learnt per product (an issue model sees only its product's complaints: "Struggling
        # to repay" is told apart from "Dealing with your servicer", not from credit-report issues); a
        # product with one issue in training falls back on the model over all products, read only over
        # the issues the taxonomy allows for the product.
        self.issue_by_product: dict[str, _LabelModel] = {}
        if issues:
            groups: dict[str, list[int]] = {}
            for index, example in enumerate(examples):
                groups.setdefault(taxonomy.current_product(example.product), []).append(index)
            for product, indexes in groups.items():
                labels = [examples[i].issue for i in indexes]
                if len(set(labels)) > 1:
                    self.issue_by_product[product] = _LabelModel(features[indexes], labels, c=ISSUE_C)
        self.products = sorted({taxonomy.current_product(p) for p in taxonomy.sample_products()}
                               | set(self.product.classes))
        self.company_mix: dict[str, Counter] = {}
        for example in examples:
            key = normalise_company(example.company)
            if key:
                self.company_mix.setdefault(key, Counter())[taxonomy.current_product(example.product)] += 1
        self.label_counts = Counter(e.product for e in examples)
        self.trained_on = len(examples)
        self.temperature = 1.0
        self.issue_temperature = 1.0
        self.issue_smoothing = 0.0
        self.signal_reader: SentenceReader | None = None  # the narrative signals' reader, set by classifier_train
        if calibrate and calibration:
            self.calibrate_on(calibration)

    # --- product ----------------------------------------------------------------------------
    def company_prior(self, company: str) -> dict[str, float]:
        """P(product | company): the respondent's complaint mix in training plus its known lines of
        business, smoothed over all products; {} for a respondent the model knows nothing of."""
        key = normalise_company(company)
        mix = Counter(self.company_mix.get(key) or {})
        lines = company_lines(key) if LINE_PSEUDO and key else set()
        for product in lines:
            mix[product] += LINE_PSEUDO / len(lines)
        if not mix:
            return {}
        total = sum(mix.values())
        return {product: (mix[product] + COMPANY_SMOOTHING / len(self.products)) / (total + COMPANY_SMOOTHING)
                for product in self.products}

    def _scores(self, text: str, company: str, row: np.ndarray) -> dict[str, float]:
        text_probability = dict(zip(self.product.classes, (float(p) for p in row), strict=True))
        cues = product_cues(f"{text} {company}")
        prior = self.company_prior(company)
        scores = {}
        unseen_prior = math.log(UNSEEN_PRIOR / len(self.products)) if UNSEEN_PRIOR else None
        for product in self.products:
            if product not in text_probability and unseen_prior is not None:
                # The text model never saw this product: it has no opinion, so a small prior stands in
                # and the product's own cue words decide.
                score = unseen_prior
            else:
                score = math.log(text_probability.get(product, 0.0) + FLOOR)
            found = len(cues.get(product, ()))
            score += CUE_WEIGHT * (min(found, CUE_CAP) if CUE_CAP else found)
            if prior:
                score += COMPANY_WEIGHT * math.log(prior[product])
            scores[product] = score
        return scores

    @staticmethod
    def _softmax(scores: dict[str, float], temperature: float) -> dict[str, float]:
        top = max(scores.values())
        weights = {label: math.exp((score - top) / temperature) for label, score in scores.items()}
        total = sum(weights.values())
        return {label: weight / total for label, weight in weights.items()}

    def calibrate_on(self, examples: list[Example]) -> None:
        """Fit the product and issue temperatures on `examples` (the dev split, which this model must
        not have been trained on): the least log-loss of their uncalibrated predictions."""
        product_pairs, issue_triples = [], []
        for example in examples:
            row = self.product.probabilities(self.vectorizer.transform([example.text]))[0]
            probabilities = self._softmax(self._scores(example.text, example.company, row), 1.0)
            product_pairs.append((probabilities, taxonomy.current_product(example.product)))
            learnt = max(sorted(probabilities), key=lambda label: probabilities[label])
            label = taxonomy.label_in_force(learnt, example.received)
            issue_triples.append((self._issue_distribution(example.text, learnt, label), example.issue,
                                  taxonomy.published_issues_of(label)))
        self.temperature = fit_temperature(product_pairs)
        self.issue_temperature, self.issue_smoothing = fit_issue_calibration(issue_triples)

    def product_probabilities(self, text: str, company: str = "") -> dict[str, float]:
        row = self.product.probabilities(self.vectorizer.transform([text]))[0]
        return self._softmax(self._scores(text, company, row), self.temperature)

    def product_views(self, text: str, company: str = "") -> dict[str, dict[str, float]]:
        """The product as the narrative alone reads it ("narrative": text model and the narrative's
        cue words), as the company alone predicts it ("company": {} when the respondent is unknown),
        and the two combined ("combined", what triage answers); each a distribution (calibrated
        temperature for the narrative and the combination)."""
        row = self.product.probabilities(self.vectorizer.transform([text]))[0]
        return {"narrative": self._softmax(self._scores(text, "", row), self.temperature),
                "company": self.company_prior(company),
                "combined": self._softmax(self._scores(text, company, row), self.temperature)}

    # --- prediction -------------------------------------------------------------------------
    @staticmethod
    def _distribution(model: _LabelModel, row: np.ndarray, allowed: dict[str, int] | None = None) -> dict[str, float]:
        """The model's probabilities over the allowed labels it learnt, renormalised ({} when it learnt
        none of them)."""
        scores = dict(zip(model.classes, (float(p) for p in row), strict=True))
        if allowed:
            known = {label: scores[label] for label in allowed if label in scores}
            total = sum(known.values())
            scores = {label: value / total if total > 0 else 0.0 for label, value in known.items()}
        return scores

    def _best(self, model: _LabelModel, row: np.ndarray, allowed: dict[str, int] | None = None,
              temperature: float = 1.0, smoothing: float = 0.0, published: tuple[str, ...] = ()) -> Prediction:
        """The most probable class among the allowed labels (its probability sharpened by the
        temperature, then smoothed over the published labels). When the model never learnt any of
        them, the taxonomy's most frequent allowed label, with no confidence to speak of."""
        scores = self._distribution(model, row, allowed)
        if not scores:
            label = sorted(allowed.items(), key=lambda item: (-item[1], item[0]))[0][0]
            return Prediction(label=label, confidence=0.0)
        label = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[0][0]
        if temperature != 1.0:
            scores = sharpen(scores, temperature)
        scores = smooth(scores, smoothing, published)
        return Prediction(label=label, confidence=min(round(scores[label], 4), MAX_CONFIDENCE))

    def _issue_model(self, learnt: str) -> _LabelModel:
        return self.issue_by_product.get(learnt, self.issue)

    def _issue_distribution(self, text: str, learnt: str, label: str) -> dict[str, float]:
        model = self._issue_model(learnt)
        return self._distribution(model, model.probabilities(self.vectorizer.transform([text]))[0],
                                  taxonomy.issues_of(label))

    def predict(self, text: str, company: str = "", received: date | None = None) -> dict[str, Prediction]:
        features = self.vectorizer.transform([text])
        probabilities = self.product_probabilities(text, company)
        learnt = sorted(probabilities.items(), key=lambda item: (-item[1], item[0]))[0]
        label = taxonomy.label_in_force(learnt[0], received)
        product = Prediction(label=label, confidence=min(round(learnt[1], 4), MAX_CONFIDENCE))
        sub_product = self._best(self.sub_product, self.sub_product.probabilities(features)[0],
                                 taxonomy.sub_products_of(label) or None)
        issue_model = self._issue_model(learnt[0])
        issue = self._best(issue_model, issue_model.probabilities(features)[0], taxonomy.issues_of(label),
                           temperature=self.issue_temperature, smoothing=self.issue_smoothing,
                           published=taxonomy.published_issues_of(label))
        return {"product": product, "sub_product": sub_product, "issue": issue}

    def predict_products(self, texts: list[str], companies: list[str] | None = None) -> list[str]:
        companies = companies or [""] * len(texts)
        return [self.predict(text, company)["product"].label for text, company in zip(texts, companies, strict=True)]

    def predict_issues(self, texts: list[str], companies: list[str] | None = None) -> list[str]:
        companies = companies or [""] * len(texts)
        return [self.predict(text, company)["issue"].label for text, company in zip(texts, companies, strict=True)]

    def idf(self) -> dict[str, float]:
        """Inverse document frequency of each unigram over the complaint sample (for summaries)."""
        vocabulary = self.vectorizer.vocabulary_
        weights = self.vectorizer.idf_
        return {term: float(weights[index]) for term, index in vocabulary.items() if " " not in term}


# --- the trained artifact -----------------------------------------------------------------
# Training takes about 10 s of CPU, a minute or several on a busy machine: too long for a run step,
# which has a soft time limit. So the classifier is trained outside any run — by
# `manage.py train_analyst` (which `make run` runs), or by classifier_train_task when a step finds
# no artifact — and written once to settings.ARBITER_ANALYST_DIR; a step only loads it (milliseconds).
_lock = threading.Lock()
_cache: dict[str, ComplaintClassifier] = {}
ARTIFACT_KIND = "arbiter-offline-classifier"
# The training task's limits: training takes a minute or more under load, far above a step's.
TRAIN_TASK_SOFT_TIME_LIMIT = 1800
TRAIN_TASK_TIME_LIMIT = 1860
# The Celery task that trains outside any step. It is sent by its name: its module (analyst.tasks)
# imports this one, and a process that never imported it (a web process) still sends it right.
TRAIN_TASK = "analyst.tasks.classifier_train_task"
NOT_READY_MESSAGE = ("preparing the offline analyst: a worker is training its classifier, about a minute; "
                     "`manage.py train_analyst` does it ahead of time")


class ClassifierNotReady(ProviderError):
    """No trained classifier yet: its training was asked of a worker, and the step is retried (a
    retryable provider error, so the run shows `retrying` with this message meanwhile)."""

    def __init__(self, message: str = NOT_READY_MESSAGE):
        super().__init__(message, retryable=True, status_code=503)


@dataclass(frozen=True)
class Artifact:
    """Where the classifier trained on these data, by this code, is kept, and what it is."""
    path: Path
    source: Path  # the complaint data it is trained on
    data_sha256: str
    code_version: str
    scope: tuple[str, ...] | None = None

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @property
    def request_path(self) -> Path:
        return self.path.with_name(self.path.name + ".requested")


@dataclass(frozen=True)
class TrainingResult:
    artifact: Artifact
    trained: bool  # False: an artifact for the same data and code was there already
    seconds: float  # training time (0 when nothing was trained)
    examples: int


@lru_cache(maxsize=1)
def code_version() -> str:
    """MODEL_FORMAT plus a fingerprint of what shapes the trained object besides the complaint data:
    this module, the example reader, the cues and the taxonomy (code and shipped data), the narrative
    cleaner, the signals' sentence reader with its labelled sets (analyst.signal_sets), and the
    library versions the pickle depends on. Any change to one of them names a new artifact, so a
    model trained by older code is never loaded by newer code. Computed once per process: it
    describes the code this process imported."""
    digest = hashlib.sha256(f"{MODEL_FORMAT}|sklearn {sklearn.__version__}|numpy {np.__version__}".encode())
    taxonomy_dir = Path(taxonomy.__file__).resolve().parent
    sources = [Path(__file__).resolve(), Path(cues_module.__file__).resolve(), Path(taxonomy.__file__).resolve(),
               Path(examples_module.__file__).resolve(),
               Path(text_module.__file__).resolve(), *sorted((taxonomy_dir / "data").glob("*")),
               Path(reader_module.__file__).resolve(), Path(signal_sets.__file__).resolve(), *signal_sets.data_files()]
    for source in sources:
        if source.is_file():
            digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return f"{MODEL_FORMAT}.{digest.hexdigest()[:8]}"


def artifact_dir() -> Path:
    return Path(settings.ARBITER_ANALYST_DIR)


def artifact_for(path: Path = DATA_FILE, splits: tuple[str, ...] | None = None) -> Artifact:
    """classifier-<data sha256, 16 hex>[-<evaluation splits>]-v<code version>.pkl; a model trained on
    some evaluation splits only never shares a file with the shipped one."""
    data = _digest_of(path)
    scope = f"-{'+'.join(splits)}" if splits else ""
    name = f"classifier-{data[:16]}{scope}-v{code_version()}.pkl"
    return Artifact(path=artifact_dir() / name, source=Path(path), data_sha256=data, code_version=code_version(),
                    scope=tuple(splits) if splits else None)


def load_artifact(artifact: Artifact) -> ComplaintClassifier | None:
    # Pickles are code: one is loaded only from our own artifact folder (no symlink out of it),
    # written by _save_artifact; nobody uploads it. A corrupt, foreign or mismatching file counts as
    # absent (the next training replaces it).
    path = artifact.path
    if path.is_symlink() or path.resolve().parent != artifact_dir().resolve():
        logger.warning("Refusing classifier artifact %s: not a plain file of %s.", path, artifact_dir())
        return None
    try:
        with open(path, "rb") as handle:
            payload = pickle.load(handle)  # noqa: S301 - our own artifact, see above
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an unreadable artifact means "train again"
        logger.warning("Ignoring unreadable classifier artifact %s.", path, exc_info=True)
        return None
    expected = (ARTIFACT_KIND, artifact.data_sha256, artifact.code_version, artifact.scope)
    found = (payload.get("kind"), payload.get("data_sha256"), payload.get("code_version"),
             payload.get("scope")) if isinstance(payload, dict) else None
    model = payload.get("model") if isinstance(payload, dict) else None
    if found != expected or not isinstance(model, ComplaintClassifier) \
            or not isinstance(model.signal_reader, SentenceReader):
        logger.warning("Ignoring classifier artifact %s: not the model of these data and this code.", path)
        return None
    return model


def _save_artifact(artifact: Artifact, model: ComplaintClassifier, *, seconds: float) -> None:
    payload = {"kind": ARTIFACT_KIND, "data_sha256": artifact.data_sha256, "code_version": artifact.code_version,
               "scope": artifact.scope, "examples": model.trained_on, "training_seconds": round(seconds, 3),
               "trained_at": datetime.now(UTC).isoformat(timespec="seconds"), "model": model}
    artifact.path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=artifact.path.parent, prefix=".tmp-classifier-")
    try:
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(payload, stream, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, artifact.path)  # atomic: a reader sees no file or the whole file
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def _training_lock(artifact: Artifact):
    """Exclusive, across processes, while one artifact is trained. flock is released by the kernel
    when its holder dies, so a killed trainer never leaves the lock taken."""
    artifact.lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(artifact.lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _training_in_progress(artifact: Artifact) -> bool:
    try:
        with open(artifact.lock_path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    return False


def _fit(examples: list[Example], dev: list[Example] | None = None) -> ComplaintClassifier:
    """The classifier of `examples`, calibrated on the dev split: the temperatures are fitted on the
    dev complaints as predicted by a model trained on the train complaints only (`dev`, when the
    examples are a scope without them; otherwise the dev rows among the examples), so no complaint
    calibrates a model that trained on it, and the test split is never used."""
    if dev is None:
        dev = [e for e in examples if split_of(e.complaint_id) == "dev"]
    train = [e for e in examples if split_of(e.complaint_id) == "train"]
    if len(train) == len(examples) or not train:
        return ComplaintClassifier(examples, calibration=dev)
    model = ComplaintClassifier(examples, calibrate=False)
    reference = ComplaintClassifier(train, calibration=dev)
    model.temperature, model.issue_temperature = reference.temperature, reference.issue_temperature
    model.issue_smoothing = reference.issue_smoothing
    return model


def classifier_train(path: Path = DATA_FILE, *, splits: tuple[str, ...] | None = None, force: bool = False,
                     say: Callable[[str], None] | None = None) -> TrainingResult:
    """Train the classifier of `path` (on the rows of `splits` only, for evaluation) and write its
    artifact, unless one for the same data and code exists (or `force`). Idempotent and safe to call
    from several processes at once: the training lock admits one trainer, and the others, once
    admitted, find its artifact and return without training."""
    artifact = artifact_for(path, splits)
    say = say or (lambda message: None)
    with _training_lock(artifact):
        existing = None if force else load_artifact(artifact)
        if existing is not None:
            return TrainingResult(artifact=artifact, trained=False, seconds=0.0, examples=existing.trained_on)
        examples = _examples_of(path, splits)
        say(f"Training the offline analyst's classifier on {len(examples)} complaints and its signal reader "
            f"(data sha256 {artifact.data_sha256[:16]}…, code version {artifact.code_version})…")
        started = time.perf_counter()
        model = _fit(examples, dev=_examples_of(path, ("dev",))) if splits else _fit(examples)
        model.signal_reader = SentenceReader(signal_sets.training_narratives(splits))
        seconds = time.perf_counter() - started
        _save_artifact(artifact, model, seconds=seconds)
        artifact.request_path.unlink(missing_ok=True)
    return TrainingResult(artifact=artifact, trained=True, seconds=seconds, examples=len(examples))


def classifier_train_request(artifact: Artifact) -> bool:
    """Ask a worker to train `artifact` (classifier_train_task), once: a marker file created with
    O_EXCL says it was asked; the task removes it when done. A marker older than the task's hard
    time limit means that request was lost (no worker took it, or it died): ask again. Returns
    whether this call sent the task. Two requests racing past a stale marker send two tasks; the
    training lock makes the second a no-op."""
    marker = artifact.request_path
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        try:
            age = time.time() - marker.stat().st_mtime
        except FileNotFoundError:
            age = 0.0  # just removed by the finished task: the artifact is there or about to be
        if age <= TRAIN_TASK_TIME_LIMIT + 60:
            return False
        marker.touch()
    try:
        celery_app.signature(TRAIN_TASK, kwargs={"data_file": str(artifact.source)}).apply_async()
    except Exception:  # the broker is away: forget the request, the next attempt asks again
        marker.unlink(missing_ok=True)
        logger.warning("Could not ask a worker to train the classifier; the step will ask again.", exc_info=True)
        return False
    return True


def _await_training(artifact: Artifact) -> ComplaintClassifier:
    """What a step does when the artifact is missing: it never trains. While another process trains
    it, wait (at most half the step's soft time limit; the step's heartbeat keeps the lease). When
    nobody does, ask a worker (classifier_train_request) and give this worker back at once with
    ClassifierNotReady: on a one-process worker the training task runs only after this step ends."""
    deadline = time.monotonic() + settings.ARBITER_RUN_STEP_SOFT_TIME_LIMIT / 2
    while True:
        model = load_artifact(artifact) if artifact.path.exists() else None
        if model is not None:
            return model
        if not _training_in_progress(artifact):
            classifier_train_request(artifact)
            # With CELERY_TASK_ALWAYS_EAGER the task has just run here; otherwise this finds nothing.
            model = load_artifact(artifact) if artifact.path.exists() else None
            if model is not None:
                return model
            raise ClassifierNotReady()
        if time.monotonic() >= deadline:
            raise ClassifierNotReady()
        time.sleep(0.5)


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
    (analyst.evaluation.split_of), so `manage.py evaluate` never scores a complaint it trained on.
    Evaluation is an offline command, not a worker's step: such a model is trained in-process."""
    previous = getattr(_scope, "splits", None)
    _scope.splits = tuple(splits)
    try:
        yield
    finally:
        _scope.splits = previous


def _examples_of(path: Path, splits: tuple[str, ...] | None) -> list[Example]:
    """The training examples of `path` (of `splits` only, when given). The shipped sample's are
    joined by the signal sets' complaints (analyst.signal_sets.classifier_examples): the sample alone,
    two thirds student loans, showed the issue models a few complaints of most products and
    the company prior 53 respondents (docs/adr/0036). Any other file trains on its own rows."""
    examples = load_examples(path)
    if Path(path).resolve() == DATA_FILE.resolve():
        examples += signal_sets.classifier_examples()
    if not splits:
        return examples
    return [e for e in examples if split_of(e.complaint_id) in splits]


def get_classifier(path: Path = DATA_FILE) -> ComplaintClassifier:
    """The trained classifier of `path`: from this process's memory, else loaded from its artifact.
    Never trained here (except within training_scope): with no artifact, a worker is asked to train
    it and ClassifierNotReady is raised, so the step is retried."""
    splits = getattr(_scope, "splits", None)
    artifact = artifact_for(path, splits)
    key = str(artifact.path)
    with _lock:
        model = _cache.get(key) or load_artifact(artifact)
        if model is None and splits:
            classifier_train(path, splits=splits)
            model = load_artifact(artifact)
        if model is not None:
            _cache[key] = model
            return model
    model = _await_training(artifact)  # outside the lock: it may wait
    with _lock:
        return _cache.setdefault(key, model)


def clear_cache() -> None:
    with _lock:
        _cache.clear()
