"""The only write path for conversation state (docs/architecture.md, "Write paths").

Every function is keyword-only, takes an `actor` (an Actor, or a user for convenience), checks
role and tenant, locks the thread row when it appends (so sequences are allocated one at a time),
writes its AuditEvent in the same transaction, and raises a core.errors.DomainError — changing
nothing — when it refuses.

Layering: conversations sits below runs (audit <- cases <- conversations <- runs). Posting a
message must start the chat run that answers it and compaction must start a run, so those two
services import runs *inside the function*; nothing at module level here imports runs
(docs/adr/0003-conversations-start-runs.md)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import IntegrityError, transaction

from accounts.models import Tenant, User
from audit.services import audit_record
from cases import policy
from cases.models import Case
from conversations.models import Message, MessageRedaction, MessageRole, Thread, ThreadSummary
from core.actors import Actor, coerce_actor
from core.errors import Conflict, Forbidden, Invalid, NotAllowed, NotFound
from core.tokens import count_tokens
from runs import services as run_services
from runs.models import AgentRun, RunStatus

# Who may talk with the case assistant. Auditors read threads but never post in them.
CAN_CHAT = frozenset({policy.ANALYST, policy.SUPERVISOR})
# Who may redact any message of their tenant (authors may always redact their own).
CAN_REDACT_ANY = frozenset({policy.SUPERVISOR, policy.ADMIN})

CHAT_GRAPH = "chat"
COMPACTION_GRAPH = "thread_compaction"


# --- shared checks ---------------------------------------------------------------------------

def _require_person(actor: Actor, roles: frozenset[str], what: str) -> User:
    if actor.is_agent:
        raise Forbidden(f"Agents cannot {what}; only a person can.")
    if not actor.is_user:
        raise Forbidden(f"Only a person can {what}.")
    if actor.user.role not in roles:
        allowed = ", ".join(sorted(roles))
        raise Forbidden(f"Your role ({actor.user.role}) cannot {what}; this needs: {allowed}.")
    return actor.user


def _require_tenant(actor: Actor, tenant_id: int) -> None:
    """A user acting on another tenant's thread learns nothing about it: 404, not 403."""
    if actor.is_user and actor.user.tenant_id != tenant_id:
        raise NotFound("No such thread.")


def _lock_thread(thread: Thread | int) -> Thread:
    thread_id = thread.pk if isinstance(thread, Thread) else thread
    try:
        return Thread.objects.select_for_update().get(pk=thread_id)
    except Thread.DoesNotExist:
        raise NotFound("No such thread.") from None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _audit(*, thread: Thread, actor: Actor, action: str, target_type: str, target_id, payload: dict,
           run_id: str = "", decision: str = "") -> None:
    # Content is never copied into the audit log, only its hash: a redaction must be able to hide
    # it everywhere the application shows it, and audit events can never be changed.
    audit_record(
        tenant_id=thread.tenant_id, case_id=thread.audit_case_id, actor_type=actor.kind,
        actor_id=actor.identifier, action=action, target_type=target_type, target_id=target_id,
        run_id=run_id, policy_version=policy.POLICY_VERSION, decision=decision,
        payload={"thread_id": thread.pk} | payload,
    )


def _next_sequence(thread: Thread) -> int:
    """Allocate the next sequence of a thread whose row the caller has locked."""
    thread.last_sequence += 1
    thread.save(update_fields=["last_sequence"])
    return thread.last_sequence


def _validate_content(content: str, *, field: str = "content") -> str:
    if not (content or "").strip():
        raise Invalid("The message is empty.", fields={field: ["Write something to send."]})
    limit = settings.CONVERSATIONS_MESSAGE_MAX_CHARS
    if len(content) > limit:
        raise Invalid(f"The message is {len(content)} characters long; the limit is {limit}.",
                      fields={field: [f"At most {limit} characters."]})
    return content.strip()


# --- threads ---------------------------------------------------------------------------------

@transaction.atomic
def thread_create(*, actor, tenant: Tenant, title: str, case: Case | None = None,
                  token_budget: int | None = None) -> Thread:
    """Open a thread, optionally about a case of the same tenant. Analysts and supervisors only.
    Raises Forbidden (role, agents), NotFound (another tenant's case), Invalid (title, budget)."""
    actor = coerce_actor(actor)
    user = _require_person(actor, CAN_CHAT, "open conversation threads")
    _require_tenant(actor, tenant.pk)
    if case is not None and case.tenant_id != tenant.pk:
        raise NotFound("No such case.")
    errors: dict[str, list[str]] = {}
    title = (title or "").strip()
    if not title:
        errors["title"] = ["Give the thread a title."]
    elif len(title) > 300:
        errors["title"] = ["At most 300 characters."]
    if token_budget is not None and token_budget < 200:
        errors["token_budget"] = ["A context budget below 200 tokens cannot hold the recent turns."]
    if errors:
        raise Invalid("The thread was not opened.", fields=errors)
    thread = Thread.objects.create(tenant=tenant, case=case, title=title, created_by=user,
                                   token_budget=token_budget)
    _audit(thread=thread, actor=actor, action="conversations.thread.created", target_type="thread",
           target_id=thread.pk, payload={"title": title, "case_id": thread.case_id})
    return thread


# --- messages --------------------------------------------------------------------------------

def _retried_post(*, thread: Thread, actor: Actor, text: str, client_token: str) -> Message | None:
    """The message this post repeats, if it is a retry (caller holds the thread lock): the same
    client token (a form's idempotency token) in this thread, or — without a token — the thread's
    last message when it is this person's with the same text, posted within
    ARBITER_CHAT_RETRY_WINDOW_SECONDS (a double click, a browser or proxy re-sending the POST)."""
    from datetime import timedelta

    from django.utils import timezone

    if client_token:
        return thread.messages.filter(role=MessageRole.USER, metadata__client_token=client_token).first()
    window = settings.ARBITER_CHAT_RETRY_WINDOW_SECONDS
    if not window:
        return None
    last = thread.messages.order_by("-sequence").first()
    if (last is not None and last.role == MessageRole.USER and last.author_id == actor.identifier
            and last.content_sha256 == _sha256(text)
            and last.created_at >= timezone.now() - timedelta(seconds=window)):
        return last
    return None


@transaction.atomic
def message_post(*, actor, thread: Thread, content: str, client_token: str = "") -> Message:
    """A person posts a message; the chat run that answers it is started in the same transaction.

    Locks the thread row, takes the next sequence, appends the message, starts the chat run
    (runs.services.run_start, which enqueues its first step on commit) and audits the post. The
    message and its run commit together: a crash after commit cannot leave a message nobody will
    answer, and a rollback leaves neither. Runs attached to one thread execute one at a time in
    the order they were started (the runs admission rule), so two posts at once are answered in
    sequence order.

    Refuses, changing nothing: agents and roles other than analyst/supervisor (Forbidden), another
    tenant's thread (NotFound), an empty or over-long message (Invalid).

    A retried post is not a new message: with the same `client_token` (a form's
    idempotency token, up to 64 characters), or without one the same text from the same person as
    the thread's last message within ARBITER_CHAT_RETRY_WINDOW_SECONDS, the earlier message is
    returned and nothing is written (no message, no run, no audit event)."""
    actor = coerce_actor(actor)
    user = _require_person(actor, CAN_CHAT, "post in conversation threads")
    _require_tenant(actor, thread.tenant_id)
    text = _validate_content(content)
    client_token = (client_token or "").strip()
    if len(client_token) > 64:
        raise Invalid("The form's token is too long.", fields={"client_token": ["At most 64 characters."]})
    locked = _lock_thread(thread)
    earlier = _retried_post(thread=locked, actor=actor, text=text, client_token=client_token)
    if earlier is not None:
        thread.last_sequence = locked.last_sequence
        return earlier
    sequence = _next_sequence(locked)
    run = _start_run(actor=actor, thread=locked, graph=CHAT_GRAPH,
                     input={"thread_id": locked.pk, "message_sequence": sequence})
    message = Message.objects.create(
        tenant_id=locked.tenant_id, thread=locked, sequence=sequence, role=MessageRole.USER,
        author_type=actor.kind, author_id=actor.identifier, author_user=user, content=text,
        content_sha256=_sha256(text), reply_run_id=str(run.pk),
        metadata={"client_token": client_token} if client_token else {},
    )
    _audit(thread=locked, actor=actor, action="conversations.message.posted", target_type="message",
           target_id=message.pk, run_id=str(run.pk),
           payload={"message_id": message.pk, "sequence": sequence, "content_sha256": message.content_sha256,
                    "chars": len(text), "reply_run_id": str(run.pk)})
    thread.last_sequence = locked.last_sequence
    return message


@transaction.atomic
def message_append_assistant(*, actor, thread: Thread, in_reply_to: Message, content: str, run_id: str,
                             metadata: dict | None = None, cited: dict | None = None) -> Message:
    """The chat graph writes its answer to one user message.

    `cited` is what the answer relied on ({case_status, case_version, artifact_ids, ...}); it is
    stored in metadata["cited"] and its status/version as columns for the drift check. Idempotent
    per user message: a retried step gets the reply the first attempt wrote (a unique
    in_reply_to backs this, so a concurrent duplicate cannot append a second one).

    Refuses: anything but an agent or the system (Forbidden: people post, the assistant answers);
    a message that is not a user message of this thread (Invalid)."""
    actor = coerce_actor(actor)
    if actor.is_user:
        raise Forbidden("Only the assistant appends replies; post your own message instead.")
    if in_reply_to.thread_id != thread.pk or in_reply_to.role != MessageRole.USER:
        raise Invalid("A reply must answer a user message of the same thread.",
                      fields={"in_reply_to": ["Not a user message of this thread."]})
    if not (content or "").strip():
        raise Invalid("The reply is empty.", fields={"content": ["The assistant must say something."]})
    if not run_id:
        raise Invalid("An assistant reply records the run that produced it.", fields={"run_id": ["Required."]})
    locked = _lock_thread(thread)
    existing = Message.objects.filter(in_reply_to=in_reply_to).first()
    if existing is not None:
        return existing
    cited = dict(cited or {})
    meta = dict(metadata or {}) | {"cited": cited}
    sequence = _next_sequence(locked)
    try:
        with transaction.atomic():
            message = Message.objects.create(
                tenant_id=locked.tenant_id, thread=locked, sequence=sequence, role=MessageRole.ASSISTANT,
                author_type=actor.kind, author_id=actor.identifier, content=content.strip(),
                content_sha256=_sha256(content.strip()), metadata=meta, run_id=str(run_id),
                in_reply_to=in_reply_to, cited_case_status=str(cited.get("case_status") or ""),
                cited_case_version=cited.get("case_version"),
            )
    except IntegrityError:
        # Only reachable if the thread lock was bypassed; the unique reply wins either way.
        raise Conflict("This message was answered at the same time by another worker.") from None
    _audit(thread=locked, actor=actor, action="conversations.message.answered", target_type="message",
           target_id=message.pk, run_id=str(run_id),
           payload={"message_id": message.pk, "sequence": sequence, "in_reply_to": in_reply_to.pk,
                    "content_sha256": message.content_sha256, "cited": cited,
                    "proposal_ids": list(meta.get("proposal_ids", [])),
                    "notice_ids": list(meta.get("notice_ids", []))})
    thread.last_sequence = locked.last_sequence
    return message


@transaction.atomic
def message_redact(*, actor, message: Message, reason: str) -> MessageRedaction:
    """Hide a message's content from views and model contexts. The message row is untouched and
    the audit keeps that (and why, and by whom) it was redacted, with the content's hash.

    Allowed: the message's own author, or a supervisor/admin of the tenant. Refuses, changing
    nothing: agents and other roles (Forbidden), another tenant's message (NotFound), no reason
    (Invalid), a message already redacted (Conflict)."""
    actor = coerce_actor(actor)
    if not actor.is_user:
        raise Forbidden("Only a person can redact a message.")
    _require_tenant(actor, message.tenant_id)
    is_author = message.author_id == actor.identifier
    if not is_author and actor.user.role not in CAN_REDACT_ANY:
        raise Forbidden(f"Your role ({actor.user.role}) can redact only your own messages; a supervisor "
                        f"can redact this one.")
    reason = (reason or "").strip()
    if not reason:
        raise Invalid("Say why the message is redacted.", fields={"reason": ["A reason is required."]})
    if len(reason) > 500:
        raise Invalid("The reason is too long.", fields={"reason": ["At most 500 characters."]})
    thread = _lock_thread(message.thread_id)
    if MessageRedaction.objects.filter(message=message).exists():
        raise Conflict("This message is already redacted.")
    redaction = MessageRedaction.objects.create(tenant_id=message.tenant_id, message=message, reason=reason,
                                                redacted_by=actor.identifier)
    _audit(thread=thread, actor=actor, action="conversations.message.redacted", target_type="message",
           target_id=message.pk,
           payload={"message_id": message.pk, "sequence": message.sequence, "reason": reason,
                    "content_sha256": message.content_sha256, "redaction_id": redaction.pk})
    return redaction


# --- compaction ------------------------------------------------------------------------------

def compaction_window(*, thread: Thread) -> tuple[int, int] | None:
    """The (from, to) sequences the next compaction folds in, or None when there is nothing to
    compact: everything after the latest summary except the last KEEP_RECENT messages, at most
    COMPACTION_BATCH messages per run. Two queries, whatever the thread's length."""
    latest = ThreadSummary.objects.filter(thread=thread).order_by("-to_sequence").first()
    start = (latest.to_sequence if latest else 0) + 1
    keep = settings.CONVERSATIONS_KEEP_RECENT
    newest_kept = (Message.objects.filter(thread=thread).order_by("-sequence")
                   .values_list("sequence", flat=True)[keep - 1:keep].first())
    if newest_kept is None or newest_kept <= start:
        return None
    end = min(newest_kept - 1, start + settings.CONVERSATIONS_COMPACTION_BATCH - 1)
    return (latest.from_sequence if latest else start), end


@transaction.atomic
def thread_compact(*, actor, thread: Thread):
    """Start a compaction run that folds older turns into a ThreadSummary (its node records it
    through thread_summary_record). Returns the run. If a compaction run of this thread is still
    unfinished it is returned instead of starting another (checked under the thread lock, which
    every compaction start takes, so two callers cannot both start one).

    Callers: a person (analyst/supervisor), or the system when a chat context would exceed its
    budget (the chat graph does this in its step's commit; agents cannot start runs themselves).
    Refuses, changing nothing: agents and other roles (Forbidden), another tenant's thread
    (NotFound), a thread with nothing to compact (NotAllowed: the last turns stay verbatim)."""
    actor = coerce_actor(actor)
    if actor.is_agent:
        raise Forbidden("Agents cannot start compaction; the system does when a context outgrows its budget.")
    if actor.is_user:
        _require_person(actor, CAN_CHAT, "compact conversation threads")
        _require_tenant(actor, thread.tenant_id)
    locked = _lock_thread(thread)
    unfinished = _unfinished_run(thread=locked, graph=COMPACTION_GRAPH)
    if unfinished is not None:
        return unfinished
    window = compaction_window(thread=locked)
    if window is None:
        keep = settings.CONVERSATIONS_KEEP_RECENT
        raise NotAllowed(f"Nothing to compact: the last {keep} messages always stay verbatim and everything "
                         f"older is already summarised.")
    run = _start_run(actor=actor, thread=locked, graph=COMPACTION_GRAPH,
                     input={"thread_id": locked.pk, "from_sequence": window[0], "to_sequence": window[1]})
    _audit(thread=locked, actor=actor, action="conversations.thread.compaction_started", target_type="thread",
           target_id=locked.pk, run_id=str(run.pk),
           payload={"from_sequence": window[0], "to_sequence": window[1], "run_id": str(run.pk)})
    return run


@transaction.atomic
def thread_summary_record(*, actor, thread: Thread, from_sequence: int, to_sequence: int, content: str,
                          run_id: str, model_call_id: str, key_facts: list[str] | None = None) -> ThreadSummary:
    """The compaction run records the summary it produced. Idempotent per end sequence (a retried
    step gets the first summary back). The summary must extend the latest one: it starts where
    the previous summary started (it folds it in) and ends after it, at a message that exists.

    Refuses, changing nothing: people (Forbidden: summaries come from a recorded model call), an
    empty summary, a missing run or model call, a range that does not extend the latest summary
    (Invalid)."""
    actor = coerce_actor(actor)
    if actor.is_user:
        raise Forbidden("Summaries are written by the compaction run, from a recorded model call.")
    errors: dict[str, list[str]] = {}
    if not (content or "").strip():
        errors["content"] = ["The summary is empty."]
    if not run_id:
        errors["run_id"] = ["A summary records the run that produced it."]
    if not model_call_id:
        errors["model_call_id"] = ["A summary records the model call that produced it."]
    if errors:
        raise Invalid("The summary was not recorded.", fields=errors)
    locked = _lock_thread(thread)
    existing = ThreadSummary.objects.filter(thread=locked, to_sequence=to_sequence).first()
    if existing is not None:
        return existing
    latest = ThreadSummary.objects.filter(thread=locked).order_by("-to_sequence").first()
    expected_from = latest.from_sequence if latest else 1
    if latest is not None and to_sequence <= latest.to_sequence:
        errors["to_sequence"] = [f"The latest summary already covers up to {latest.to_sequence}."]
    if from_sequence != expected_from:
        errors["from_sequence"] = [f"A new summary must start at {expected_from}."]
    if not 1 <= to_sequence <= locked.last_sequence:
        errors["to_sequence"] = [f"The thread has messages 1..{locked.last_sequence}."]
    if errors:
        raise Invalid("The summary does not extend the thread's latest summary.", fields=errors)
    content = content.strip()
    summary = ThreadSummary.objects.create(
        tenant_id=locked.tenant_id, thread=locked, from_sequence=from_sequence, to_sequence=to_sequence,
        content=content, key_facts=list(key_facts or []), token_count=count_tokens(content),
        run_id=str(run_id), model_call_id=str(model_call_id), previous=latest,
    )
    _audit(thread=locked, actor=actor, action="conversations.summary.recorded", target_type="thread_summary",
           target_id=summary.pk, run_id=str(run_id),
           payload={"summary_id": summary.pk, "from_sequence": from_sequence, "to_sequence": to_sequence,
                    "model_call_id": str(model_call_id), "content_sha256": _sha256(content),
                    "previous_summary_id": latest.pk if latest else None})
    return summary


# --- runs (the run engine sits below conversations) ---------------------------------------------

def _start_run(*, actor: Actor, thread: Thread, graph: str, input: dict):
    return run_services.run_start(actor=actor, case=thread.case, thread=thread, tenant=thread.tenant,
                                  graph=graph, input=input)


def _unfinished_run(*, thread: Thread, graph: str):
    return (AgentRun.objects.filter(thread=thread, graph=graph, status__in=RunStatus.unfinished())
            .order_by("id").first())
