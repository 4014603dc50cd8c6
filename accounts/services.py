"""Writes for accounts: API keys, and a person's display density. Tenants and people are managed in the admin."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.models import ApiKey, Density, Role, Tenant, User
from audit.services import audit_record
from core.errors import Conflict, Invalid

KEY_PREFIX = "arb"


def api_key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def api_key_parse(key: str) -> tuple[str, str] | None:
    """`arb_<prefix>_<secret>` -> (prefix, key); None when it does not have that shape."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], key


def api_key_matches(api_key: ApiKey, key: str) -> bool:
    return hmac.compare_digest(api_key.secret_hash, api_key_hash(key))


def _actor_fields(actor: User | None) -> dict:
    if actor is None:
        return {"actor_type": "system", "actor_id": "system:manage.py"}
    return {"actor_type": "user", "actor_id": f"user:{actor.pk}"}


@transaction.atomic
def api_key_create(*, tenant: Tenant, name: str, role: str, actor: User | None = None,
                   expires_at: datetime | None = None) -> tuple[ApiKey, str]:
    """Create an API key and its service account (role `role`, no password, cannot log in).

    Returns the key row and the plaintext key, which is shown once and never stored (only its
    sha256). `actor` is the person creating it (None: an operator at the command line). Refuses
    (Invalid) an unknown role, an empty name or an expiry in the past; writes one audit event."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise Invalid("Give the key a name (1 to 100 characters).", fields={"name": ["1 to 100 characters."]})
    if role not in Role.values:
        raise Invalid(f"Unknown role {role!r}; use one of {', '.join(Role.values)}.",
                      fields={"role": [f"One of {', '.join(Role.values)}."]})
    if expires_at is not None and expires_at <= timezone.now():
        raise Invalid("The expiry is in the past.", fields={"expires_at": ["Must be in the future."]})
    if actor is not None and actor.tenant_id not in (None, tenant.pk):
        raise Invalid("You can create keys for your own organisation only.", fields={"tenant": ["Not yours."]})
    prefix = secrets.token_hex(6)
    key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    user = User(username=f"apikey-{prefix}", tenant=tenant, role=role, is_service_account=True,
                first_name=f"API key {name}"[:150])
    user.set_unusable_password()
    user.save()
    api_key = ApiKey.objects.create(tenant=tenant, user=user, name=name, prefix=prefix, secret_hash=api_key_hash(key),
                                    created_by=actor, expires_at=expires_at)
    audit_record(tenant_id=tenant.pk, **_actor_fields(actor), action="accounts.api_key.created",
                 target_type="apikey", target_id=api_key.pk, decision="allowed",
                 payload={"name": name, "prefix": prefix, "role": role, "service_account": f"user:{user.pk}",
                          "expires_at": expires_at.isoformat() if expires_at else None})
    return api_key, key


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: User | None = None) -> ApiKey:
    """Revoke a key now: every later request with it is 401. Its service account is deactivated
    (its rows keep pointing at it). Refuses (Conflict) a key already revoked; writes one audit event."""
    locked = ApiKey.objects.select_for_update().select_related("user").get(pk=api_key.pk)
    if locked.revoked_at is not None:
        raise Conflict(f"The key {locked} was already revoked at {locked.revoked_at:%Y-%m-%d %H:%M} UTC.")
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at"])
    User.objects.filter(pk=locked.user_id).update(is_active=False)
    audit_record(tenant_id=locked.tenant_id, **_actor_fields(actor), action="accounts.api_key.revoked",
                 target_type="apikey", target_id=locked.pk, decision="allowed",
                 payload={"name": locked.name, "prefix": locked.prefix})
    return locked


def api_key_touch(*, api_key: ApiKey, now: datetime) -> None:
    """Record that the key was used, at most once a minute: a conditional UPDATE, so a busy key
    does not write a row per request and concurrent requests never contend on it."""
    cutoff = now - timezone.timedelta(minutes=1)
    from django.db.models import Q

    ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff), pk=api_key.pk) \
        .update(last_used_at=now)


def user_density_set(*, user: User, density: str) -> User:
    """Remember how tightly `user` wants the lists set ("compact" or "comfortable"). A person's own
    display preference: not audited, changes nothing anyone else sees. Invalid for another value;
    nothing is saved then."""
    if density not in Density.values:
        raise Invalid("Choose a compact or a comfortable view.", fields={"density": ["compact or comfortable"]})
    User.objects.filter(pk=user.pk).update(ui_density=density)
    user.ui_density = density
    return user
