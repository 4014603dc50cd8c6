"""Rebuild cases from their CaseEvents and compare with the stored rows: any difference is drift.

    manage.py case_replay CASE-2026-000042 [--tenant acme]
    manage.py case_replay --all [--tenant acme]

The replay goes through cases.reducer, the same deterministic fold the rest of the code relies
on. Any difference between the replayed state and the row means the row was changed outside the
services (a queryset update, a manual SQL fix, a bug): it is reported field by field and the
command exits non-zero. Each event's recorded case_version is also checked against the replay,
so a removed or reordered event shows up even where the final state happens to agree.

--all streams (ADR 0010): the cases and all their events are two ordered scans read in batches of
ARBITER_AUDIT_VERIFY_BATCH_SIZE (server-side cursors on PostgreSQL) and merged by case id — no round
trip per case, constant memory whatever the ledger's size.

This is an operations command: it reads across tenants on purpose (the operator chooses the
scope with --tenant), and it writes nothing."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError

from accounts.models import Tenant
from cases.models import Case, CaseEvent
from cases.reducer import REPLAYED_FIELDS, ReplayError, apply_event, case_state
from core.commands import DatabaseCommand


def replay_events(case: Case, events) -> tuple[dict, list[str]]:
    """(replayed state, problems) for `case` from `events`, (sequence, event_type, payload,
    case_version) in sequence order: every field where the row and the replay disagree, and every
    event whose recorded case version the replay contradicts. Empty problems means no drift."""
    state: dict = {}
    problems: list[str] = []
    for sequence, event_type, payload, case_version in events:
        try:
            state = apply_event(state, event_type, payload)
        except (ReplayError, KeyError, TypeError) as exc:
            problems.append(f"event #{sequence} ({event_type}) cannot be replayed: {exc}")
            return state, problems
        if case_version != state["version"]:
            problems.append(f"event #{sequence} ({event_type}) records case version "
                            f"{case_version}, the replay is at version {state['version']}")
    if not state:
        problems.append("no case.created event: the case has no history to replay")
        return state, problems
    stored = case_state(case)
    for field in REPLAYED_FIELDS:
        if stored[field] != state.get(field):
            problems.append(f"{field}: stored {stored[field]!r}, replayed {state.get(field)!r}")
    return state, problems


def replay_case(case: Case) -> tuple[dict, list[str]]:
    """replay_events over the case's own events (one query)."""
    return replay_events(case, case.events.order_by("sequence").values_list("sequence", "event_type", "payload",
                                                                             "case_version"))


def replay_all(cases):
    """(case, problems) for every case of the `cases` queryset, streaming: the cases in id order and
    every event of those cases in (case id, sequence) order, each read in batches and merged."""
    batch = settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE
    events = (CaseEvent.objects.filter(case__in=cases.values("pk")).order_by("case_id", "sequence")
              .values_list("case_id", "sequence", "event_type", "payload", "case_version").iterator(chunk_size=batch))
    pending = next(events, None)

    def of_case(case_id: int):
        nonlocal pending
        while pending is not None and pending[0] < case_id:
            pending = next(events, None)  # events of a case outside the scope: not ours to check
        while pending is not None and pending[0] == case_id:
            yield pending[1:]
            pending = next(events, None)

    for case in cases.select_related("tenant").order_by("pk").iterator(chunk_size=batch):
        _state, problems = replay_events(case, of_case(case.pk))
        yield case, problems


class Command(DatabaseCommand):
    help = ("Rebuild a case from its events and report every field that differs from the stored row "
            "(exit status 1 on any difference). --all checks every case.")

    def add_arguments(self, parser):
        parser.add_argument("reference", nargs="?", help="Case reference, e.g. CASE-2026-000042.")
        parser.add_argument("--tenant", help="Tenant slug: needed when several tenants use the reference; "
                                             "with --all, limits the check to that tenant.")
        parser.add_argument("--all", action="store_true", dest="check_all", help="Check every case.")

    def handle(self, *args, reference=None, tenant=None, check_all=False, **options):
        if check_all == bool(reference):
            raise CommandError("Give either a case reference or --all.")
        cases = Case.objects.select_related("tenant")
        if tenant:
            found = Tenant.objects.filter(slug=tenant).first()
            if found is None:
                raise CommandError(f"No tenant with slug {tenant!r}.")
            cases = cases.filter(tenant=found)
        if check_all:
            return self._check_all(cases)
        return self._check_one(cases, reference, tenant)

    def _check_one(self, cases, reference: str, tenant: str | None) -> None:
        matches = list(cases.filter(reference=reference))
        if not matches:
            where = f" in tenant {tenant!r}" if tenant else ""
            raise CommandError(f"No case with reference {reference!r}{where}.")
        if len(matches) > 1:
            slugs = ", ".join(sorted(c.tenant.slug for c in matches))
            raise CommandError(f"{reference} exists in several tenants ({slugs}); choose one with --tenant.")
        case = matches[0]
        state, problems = replay_case(case)
        self.stdout.write(f"{case.reference} ({case.tenant.slug}): replayed {case.events.count()} events")
        for field in REPLAYED_FIELDS:
            if field in state:
                self.stdout.write(f"  {field}: {state[field]!r}")
        if problems:
            for problem in problems:
                self.stderr.write(f"DRIFT {case.reference}: {problem}")
            raise CommandError(f"{case.reference} differs from its replay in {len(problems)} place(s).")
        self.stdout.write(self.style.SUCCESS(f"OK: {case.reference} matches its event history."))

    def _check_all(self, cases) -> None:
        checked = drifted = 0
        for case, problems in replay_all(cases):
            checked += 1
            if problems:
                drifted += 1
                for problem in problems:
                    self.stderr.write(f"DRIFT {case.reference} ({case.tenant.slug}): {problem}")
        if drifted:
            raise CommandError(f"{drifted} of {checked} cases differ from their replay.")
        self.stdout.write(self.style.SUCCESS(f"OK: {checked} cases match their event history."))
