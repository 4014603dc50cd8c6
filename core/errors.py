"""Domain errors with stable codes. Every service raises one of these when it refuses, and
changes nothing when it does. One DRF exception handler (core.api) and one template map them
to HTTP: not_allowed / stale / conflict -> 409, forbidden and person_required -> 403,
not_found -> 404, invalid -> 400 with field messages."""


class DomainError(Exception):
    code = "error"
    http_status = 400

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None, **context):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        self.context = context

    def as_dict(self) -> dict:
        data = {"code": self.code, "detail": self.message}
        if self.fields:
            data["fields"] = self.fields
        return data


class NotAllowed(DomainError):
    """The action is not possible in the object's current state."""

    code = "not_allowed"
    http_status = 409


class Forbidden(DomainError):
    """The actor lacks the role or right for this action."""

    code = "forbidden"
    http_status = 403


class PersonRequired(Forbidden):
    """A decision (approve, reject, decide, close, reopen, settle) needs a person signed in: an
    API key's service account is refused whatever its role, so a leaked or misused key can
    prepare work but never decide it."""

    code = "person_required"
    http_status = 403


class Stale(DomainError):
    """The request was made against a version that is no longer current."""

    code = "stale"
    http_status = 409


class Conflict(DomainError):
    """Someone else changed or claimed the object at the same time, or it was already done."""

    code = "conflict"
    http_status = 409


class Invalid(DomainError):
    """The input is malformed; `fields` says which field and why."""

    code = "invalid"
    http_status = 400


class NotFound(DomainError):
    """The object does not exist for this tenant (another tenant's object is never revealed)."""

    code = "not_found"
    http_status = 404


class Busy(DomainError):
    """The database kept refusing the change for lock conflicts (deadlock or serialization failure)
    after the bounded retries: nothing was changed; retry after the seconds in Retry-After."""

    code = "busy"
    http_status = 503
