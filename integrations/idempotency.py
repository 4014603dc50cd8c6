"""`Idempotency-Key` for every unsafe API request: one mechanism, applied by the API base view
(core.api_base.ApiView, to which IntegrationsConfig.ready() hands these functions), so every
POST/PATCH/PUT/DELETE of the API honours it.

- Same credential, same key, same request (method, path, query, body) → the stored response is
  replayed with `Idempotent-Replayed: true`; nothing runs again.
- Same key, different request → 422 `idempotency_key_reused`.
- Same key while the first request is still running → 409 `conflict` with Retry-After: the record
  is claimed (inserted) *before* the request runs, so of two concurrent copies only one acts — the
  unique constraint (owner, key) decides.
- 5xx answers and 429 are not stored (the client may retry with the same key); records expire after
  ARBITER_API_IDEMPOTENCY_TTL_HOURS and are purged hourly."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from core.api import IdempotencyMismatch
from core.errors import Conflict
from core.idempotency import IdempotentReplay
from integrations.models import IdempotencyRecord

HEADER = "Idempotency-Key"
REPLAY_HEADER = "Idempotent-Replayed"
_KEPT_HEADERS = ("Location", "ETag", "Retry-After", "Content-Type")


def credential_of(request) -> str:
    api_key = getattr(request, "auth", None)
    if api_key is not None and type(api_key).__name__ == "ApiKey":
        return f"key:{api_key.pk}"
    return f"user:{request.user.pk}"


def _normalise(value):
    if isinstance(value, UploadedFile):
        digest = hashlib.sha256()
        for chunk in value.chunks():
            digest.update(chunk)
        value.seek(0)
        return {"file": value.name, "size": value.size, "sha256": digest.hexdigest()}
    if hasattr(value, "lists"):  # QueryDict / MultiValueDict
        return {key: [_normalise(item) for item in items] for key, items in value.lists()}
    if isinstance(value, dict):
        return {str(key): _normalise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(item) for item in value]
    return value


def request_fingerprint(request) -> str:
    data = _normalise(request.data)
    if request.FILES:
        data = {"data": data, "files": _normalise(request.FILES)}
    canonical = json.dumps({"method": request.method, "path": request.path,
                            "query": sorted(request.query_params.lists()), "data": data},
                           sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def idempotency_key_of(request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= 200 or not key.isascii() or not key.isprintable():
        raise ValidationError({HEADER: ["1 to 200 printable ASCII characters (a UUID is a good key)."]})
    return key


def _replay(record: IdempotencyRecord) -> Response:
    headers = {**record.response_headers, REPLAY_HEADER: "true"}
    headers.pop("Content-Type", None)
    return Response(record.response_body, status=record.response_status, headers=headers)


def idempotency_begin(request) -> IdempotencyRecord | None:
    """Claim the key for this request, or raise: IdempotentReplay (done before), IdempotencyMismatch
    (422, another request), Conflict (409, still in progress). None when no key was sent."""
    key = idempotency_key_of(request)
    if key is None:
        return None
    owner = credential_of(request)
    fingerprint = request_fingerprint(request)
    now = timezone.now()
    IdempotencyRecord.objects.filter(owner=owner, key=key, expires_at__lte=now).delete()
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(
                owner=owner, key=key, fingerprint=fingerprint, method=request.method, path=request.path[:300],
                expires_at=now + timedelta(hours=settings.ARBITER_API_IDEMPOTENCY_TTL_HOURS))
    except IntegrityError:
        pass
    existing = IdempotencyRecord.objects.filter(owner=owner, key=key).first()
    if existing is None:  # expired and purged between the two statements: the client may retry
        raise Conflict("A request with this Idempotency-Key just finished; retry.")
    if existing.fingerprint != fingerprint:
        raise IdempotencyMismatch()
    if existing.response_status is None:
        raise Conflict("A request with this Idempotency-Key is still in progress; retry in a moment.",
                       retry_after=1)
    raise IdempotentReplay(_replay(existing))


def idempotency_complete(record: IdempotencyRecord, response) -> None:
    """Store the answer to replay; forget the claim when the answer must not be replayed."""
    if response.status_code >= 500 or response.status_code == 429 or not hasattr(response, "data"):
        idempotency_abandon(record)
        return
    record.response_status = response.status_code
    record.response_body = response.data
    record.response_headers = {name: response[name] for name in _KEPT_HEADERS if response.has_header(name)}
    record.save(update_fields=["response_status", "response_body", "response_headers"])


def idempotency_abandon(record: IdempotencyRecord) -> None:
    IdempotencyRecord.objects.filter(pk=record.pk, response_status__isnull=True).delete()


def idempotency_purge_expired() -> int:
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
