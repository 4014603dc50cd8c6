"""The offline analyst's classifier is trained once, outside any run: by `manage.py train_analyst`
(which `make run` runs) or by classifier_train_task when a step finds no artifact. A step only
loads it; without one it asks a worker and is retried, and never trains.

Training for real takes a minute or more, so these tests train only through `classifier._fit`,
replaced by a function that hands back the suite's shipped model (tests/conftest.py trains that
one once) and counts its calls: everything around training — the artifact, its name, the lock, the
request, the task, the retries — is the real code."""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command

from analyst import classifier
from analyst.tasks import classifier_train_task
from audit.models import AuditEvent
from cases import services as case_services
from runs import services as run_services
from runs.executor import run_step
from runs.models import AgentRun, ModelCall, RunStatus
from tests.factories import make_case
from tests.runs.conftest import drive


@pytest.fixture(scope="session")
def shipped_model(shipped_classifier):
    """The suite's shipped model, loaded while the settings still name the shared folder."""
    return classifier.load_artifact(shipped_classifier)


@pytest.fixture
def empty_dir(settings, tmp_path):
    """An artifact folder with nothing trained in it, and nothing of it in this process's memory."""
    settings.ARBITER_ANALYST_DIR = tmp_path / "analyst"
    classifier.clear_cache()
    yield settings.ARBITER_ANALYST_DIR
    classifier.clear_cache()


# The shipped classifier's examples: the sample's 191 complaints and 628 of the signal sets (their
# blind, tuning and tuning2 complaints without a narrative repeated in the sample or the held-out set).
TRAINED_ON = 191 + 628


@pytest.fixture
def fits(shipped_model, monkeypatch):
    """Each training, as the number of examples it got; the model it yields is the shipped one."""
    model = shipped_model
    calls: list[int] = []

    def fit(examples):
        calls.append(len(examples))
        return model

    monkeypatch.setattr(classifier, "_fit", fit)
    return calls


@pytest.fixture
def published(monkeypatch):
    """Every training task sent to the broker (its kwargs); nothing reaches one."""
    calls: list[dict] = []
    monkeypatch.setattr(classifier_train_task, "apply_async", lambda args=None, kwargs=None, **_: calls.append(kwargs))
    return calls


@pytest.fixture
def no_training(monkeypatch):
    """Any real training from here on fails the test loudly."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the classifier was trained")

    monkeypatch.setattr(classifier.ComplaintClassifier, "__init__", refuse)


# --- the command ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_evaluate_on_a_signal_set_trains_the_shipped_classifier_first_when_none_is_there(empty_dir, fits):
    """Before, every analysis of `evaluate --split heldout2` on a fresh checkout waited for a worker to
    train the classifier and failed after four attempts: evaluation is an offline command and trains
    the shipped model itself, saying so, as it trains the scoped one for the sample."""
    out = StringIO()
    call_command("evaluate", "--split", "heldout2", "--limit", "1", stdout=out)
    assert fits == [TRAINED_ON] and classifier.artifact_for().path.is_file()
    assert "Training the offline analyst's classifier" in out.getvalue()
    assert " run completed in " in out.getvalue(), out.getvalue()
    call_command("evaluate", "--split", "heldout2", "--limit", "1", stdout=StringIO())
    assert fits == [TRAINED_ON]  # trained once


def test_train_analyst_trains_once_and_a_second_call_is_a_no_op(empty_dir, fits):
    first = StringIO()
    call_command("train_analyst", stdout=first)
    artifact = classifier.artifact_for()
    assert fits == [TRAINED_ON]
    assert artifact.path.parent == empty_dir and artifact.path.is_file()
    assert artifact.path.name == f"classifier-{artifact.data_sha256[:16]}-v{classifier.code_version()}.pkl"
    assert classifier.file_sha256(classifier.DATA_FILE) == artifact.data_sha256
    text = first.getvalue()
    assert f"Wrote {artifact.path}" in text and artifact.data_sha256 in text and "loads in" in text
    assert f"Trained on {TRAINED_ON} complaints" in text

    second = StringIO()
    call_command("train_analyst", stdout=second)
    assert fits == [TRAINED_ON]  # not trained again
    [line] = second.getvalue().splitlines()
    assert line.startswith("The offline analyst's classifier is already trained:") and line.endswith("Nothing to do.")
    assert sorted(p.name for p in empty_dir.iterdir() if not p.name.endswith(".lock")) == [artifact.path.name]

    call_command("train_analyst", "--force", stdout=StringIO())
    assert fits == [TRAINED_ON, TRAINED_ON]


def test_two_trainers_at_once_train_once(empty_dir, fits):
    results = []
    threads = [threading.Thread(target=lambda: results.append(classifier.classifier_train())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fits == [TRAINED_ON]
    assert sorted(result.trained for result in results) == [False, True]


def test_the_artifact_records_its_data_and_code_and_loads_without_training(empty_dir, shipped_classifier,
                                                                           no_training):
    shutil.copy(shipped_classifier.path, empty_dir.mkdir(parents=True) or empty_dir)
    started = time.perf_counter()
    model = classifier.get_classifier()
    elapsed = time.perf_counter() - started
    assert model.trained_on == TRAINED_ON
    assert elapsed < 5  # milliseconds on an idle machine; generous for a busy one
    assert classifier.get_classifier() is model  # then from memory


def test_an_artifact_of_other_data_or_code_or_outside_the_folder_is_never_loaded(
        empty_dir, shipped_classifier, shipped_model, published, no_training, tmp_path):
    empty_dir.mkdir(parents=True)
    artifact = classifier.artifact_for()
    # A file of another code version under the current name: refused on its metadata.
    stale = classifier.Artifact(path=artifact.path, source=artifact.source, data_sha256=artifact.data_sha256,
                                code_version="6.00000000")
    classifier._save_artifact(stale, shipped_model, seconds=1.0)
    assert classifier.load_artifact(artifact) is None
    # A symlink to a pickle elsewhere: refused without being opened.
    artifact.path.unlink()
    elsewhere = tmp_path / "elsewhere.pkl"
    shutil.copy(shipped_classifier.path, elsewhere)
    os.symlink(elsewhere, artifact.path)
    assert classifier.load_artifact(artifact) is None
    # Garbage: ignored.
    artifact.path.unlink()
    artifact.path.write_bytes(b"not a pickle")
    assert classifier.load_artifact(artifact) is None
    with pytest.raises(classifier.ClassifierNotReady):
        classifier.get_classifier()
    assert len(published) == 1


def test_training_replaces_a_corrupt_artifact(empty_dir, fits):
    artifact = classifier.artifact_for()
    empty_dir.mkdir(parents=True)
    artifact.path.write_bytes(b"not a pickle")
    assert classifier.classifier_train().trained is True
    assert fits == [TRAINED_ON] and classifier.load_artifact(artifact) is not None


# --- asking a worker --------------------------------------------------------------------------
def test_a_request_is_sent_once_until_the_task_is_done_or_lost(empty_dir, published, fits):
    artifact = classifier.artifact_for()
    assert classifier.classifier_train_request(artifact) is True
    assert classifier.classifier_train_request(artifact) is False
    assert published == [{"data_file": str(classifier.DATA_FILE)}]
    # Lost (older than the task's hard time limit): asked again.
    old = time.time() - classifier.TRAIN_TASK_TIME_LIMIT - 120
    os.utime(artifact.request_path, (old, old))
    assert classifier.classifier_train_request(artifact) is True
    assert len(published) == 2
    # The task trains and clears the request; a later request would be a new one.
    assert classifier_train_task(**published[0]) is True
    assert fits == [TRAINED_ON] and not artifact.request_path.exists()
    assert classifier_train_task(**published[1]) is False  # the duplicate: nothing to do
    assert fits == [TRAINED_ON]


def test_a_request_the_broker_refuses_is_forgotten(empty_dir, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(classifier_train_task, "apply_async", refuse)
    artifact = classifier.artifact_for()
    assert classifier.classifier_train_request(artifact) is False
    assert not artifact.request_path.exists()  # the next attempt asks again


def test_a_step_waits_for_a_training_in_progress_elsewhere(empty_dir, shipped_classifier, published, no_training):
    artifact = classifier.artifact_for()
    empty_dir.mkdir(parents=True)
    locked, release = threading.Event(), threading.Event()

    def trainer():  # another process, as far as flock is concerned: its own open file
        with open(artifact.lock_path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            locked.set()
            release.wait(5)
            # As the real trainer writes it: a whole file renamed into place, never a half-written one
            # (a plain copy let the waiter read a truncated pickle, find no training and ask for one).
            partial = artifact.path.with_name(".tmp-" + artifact.path.name)
            shutil.copy(shipped_classifier.path, partial)
            os.replace(partial, artifact.path)
            fcntl.flock(handle, fcntl.LOCK_UN)

    thread = threading.Thread(target=trainer)
    thread.start()
    locked.wait(5)
    threading.Timer(1.0, release.set).start()
    model = classifier.get_classifier()
    thread.join()
    assert model.trained_on == TRAINED_ON
    assert published == []  # someone was training it already: nothing asked


def test_the_wait_is_bounded_by_the_step_time_limit(empty_dir, settings, published, no_training):
    settings.ARBITER_RUN_STEP_SOFT_TIME_LIMIT = 2
    artifact = classifier.artifact_for()
    empty_dir.mkdir(parents=True)
    with open(artifact.lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(classifier.ClassifierNotReady):
            classifier.get_classifier()
        assert 0.9 <= time.monotonic() - started < 5
    assert published == []


# --- in a run -----------------------------------------------------------------------------------
@pytest.fixture
def enqueued_steps(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kwargs: calls.append(run_id))
    return calls


def _started_run(analyst, title):
    case = make_case(actor=analyst, title=title)
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    return run_services.run_start(actor=analyst, case=case, enqueue=False)


@pytest.mark.django_db
def test_a_step_without_the_classifier_asks_a_worker_and_retries_then_completes(
        analyst, empty_dir, shipped_model, published, monkeypatch, enqueued_steps):
    trained_in_step = []
    monkeypatch.setattr(classifier, "_fit", lambda examples: trained_in_step.append(len(examples)))
    runs = [_started_run(analyst, "Charged twice for one purchase"), _started_run(analyst, "Refund refused")]

    for run in runs:
        outcome = run_step(run_id=run.pk, worker_id="worker-a", enqueue=False)
        assert outcome.action == "retry"
        run.refresh_from_db()
        assert (run.status, run.error_code) == (RunStatus.RUNNING, "retrying")
        assert "preparing the offline analyst: a worker is training its classifier, about a minute" in run.error
        assert run.retry_counts == {"1": 1}
        assert AuditEvent.objects.filter(action="runs.step.retried", target_id=str(run.pk)).count() == 1
        assert "preparing the offline analyst" in ModelCall.objects.get(run=run, agent="triage").error
    assert trained_in_step == []  # nothing was trained inside run_step
    assert published == [{"data_file": str(classifier.DATA_FILE)}]  # asked twice, sent once

    # The worker takes the training task (its own time limits, outside any run).
    monkeypatch.setattr(classifier, "_fit", lambda examples: shipped_model)
    assert classifier_train_task(**published[0]) is True

    monkeypatch.setattr(classifier, "_fit", lambda examples: trained_in_step.append(len(examples)))
    for run in runs:
        done = drive(AgentRun.objects.get(pk=run.pk), worker_id="worker-a")
        assert done.status == RunStatus.COMPLETED, done.error
        assert done.error == ""
    assert trained_in_step == [] and len(published) == 1
