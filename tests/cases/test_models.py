"""Model-level guarantees: protected FSM fields stay protected, also while another instance (in
another thread) is being refreshed; refresh_from_db still reloads what Django reloads."""

import pytest
from django.db import models

from cases.models import Case, Notice, Proposal
from cases.services import notice_draft, proposal_create


def test_refresh_never_lifts_protection_for_other_instances(case, monkeypatch):
    """django-fsm-2's own refresh sets `protected = False` on the shared field while it reloads:
    another thread could then assign the status directly, and two concurrent refreshes crash each
    other. Ours must leave the field protected throughout."""
    field = Case._meta.get_field("status")
    other = Case.objects.get(pk=case.pk)
    seen = []
    original = models.Model.refresh_from_db

    def spy(instance, *args, **kwargs):
        seen.append(field.protected)
        with pytest.raises(AttributeError):
            other.status = "closed"  # what a concurrent thread might try meanwhile
        return original(instance, *args, **kwargs)

    monkeypatch.setattr(models.Model, "refresh_from_db", spy)
    case.refresh_from_db()
    assert seen == [True]
    assert field.protected is True


@pytest.mark.parametrize("model", [Case, Proposal, Notice])
def test_every_fsm_model_uses_the_thread_safe_refresh(model):
    from cases.models import ThreadSafeRefreshMixin

    assert issubclass(model, ThreadSafeRefreshMixin)
    assert model.refresh_from_db is ThreadSafeRefreshMixin.refresh_from_db


def test_refresh_reloads_status_and_other_fields(case):
    Case.objects.filter(pk=case.pk).update(status="triaged", title="Changed elsewhere")
    case.refresh_from_db()
    assert (case.status, case.title) == ("triaged", "Changed elsewhere")
    with pytest.raises(AttributeError):
        case.status = "closed"


def test_refresh_with_named_fields_leaves_the_others(case):
    Case.objects.filter(pk=case.pk).update(status="triaged", title="Changed elsewhere")
    case.refresh_from_db(fields=["title"])
    assert (case.status, case.title) == ("new", "Changed elsewhere")
    case.refresh_from_db(fields=["status"])
    assert case.status == "triaged"


def test_deferred_fields_load_on_access(case):
    partial = Case.objects.only("title").get(pk=case.pk)
    assert "reference" in partial.get_deferred_fields()
    assert partial.reference == case.reference  # a refresh_from_db(fields=["reference"]) underneath
    assert str(partial).startswith(case.reference)
    assert partial.status == "new"
    with pytest.raises(AttributeError):
        partial.status = "closed"


def test_failed_refresh_keeps_the_status(case):
    ghost = Case.objects.get(pk=case.pk)
    ghost.pk = case.pk + 10_000
    with pytest.raises(Case.DoesNotExist):
        ghost.refresh_from_db()
    assert ghost.status == "new"
    with pytest.raises(AttributeError):
        ghost.status = "closed"


def test_refresh_clears_cached_reverse_relations(case, analyst):
    cached = list(case.evidence.all())
    assert len(cached) == 1
    prefetched = Case.objects.prefetch_related("evidence").get(pk=case.pk)
    assert len(prefetched.evidence.all()) == 1
    from cases.services import evidence_add

    evidence_add(actor=analyst, case=case, title="More", text="More text.")
    prefetched.refresh_from_db()
    assert len(prefetched.evidence.all()) == 2


def test_refreshed_case_can_be_transitioned_after_an_outside_change(case, analyst):
    """ConcurrentTransitionMixin's baseline follows the refresh, so a later save is not refused."""
    from cases import services

    stale_copy = Case.objects.get(pk=case.pk)
    services.case_transition(actor=analyst, case=case, transition="triage")
    stale_copy.refresh_from_db()
    services.case_transition(actor=analyst, case=stale_copy, transition="start_review")
    case.refresh_from_db()
    assert case.status == "under_review"


def test_proposal_and_notice_refresh(case, agent):
    proposal = proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                               rationale="Small.")
    notice = notice_draft(actor=agent, case=case, subject="S", body="B")
    Proposal.objects.filter(pk=proposal.pk).update(status="withdrawn")
    Notice.objects.filter(pk=notice.pk).update(status="withdrawn")
    proposal.refresh_from_db()
    notice.refresh_from_db()
    assert (proposal.status, notice.status) == ("withdrawn", "withdrawn")
