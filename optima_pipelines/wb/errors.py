"""What can go wrong talking to WB, as exceptions a job can act on.

Every message names the cabinet and the endpoint (``GET statistics /api/v1/supplier/orders``) and
never the token. ``is_transient`` says whether trying the same work later may succeed: jobs retry
those (WB 429/5xx, network) and fail the others at once (bad token, malformed data, bad request).
"""

from __future__ import annotations

from datetime import datetime

from optima_pipelines.errors import OptimaError


class WbError(OptimaError):
    """Base class of every WB client error."""

    #: Whether the same call may succeed later without anyone changing anything.
    is_transient: bool = False

    def __init__(self, message: str, *, cabinet_id: str, endpoint: str | None = None):
        super().__init__(message)
        self.cabinet_id = cabinet_id
        self.endpoint = endpoint

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Keyword-only constructors do not survive pickling's default cls(*args): restore the state.
        return _restore, (type(self), str(self), self.__dict__)


def _restore(cls: type[WbError], message: str, state: dict) -> WbError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class WbAuthError(WbError):
    """401/403: the token is bad, expired, revoked or lacks the endpoint's category. Never retried."""

    def __init__(self, *, cabinet_id: str, endpoint: str, status: int | None, detail: str | None):
        code = f"HTTP {status}" if status is not None else "not sent"
        reason = f": {detail}" if detail else ""
        super().__init__(
            f"WB rejected the token of cabinet {cabinet_id!r} on {endpoint} ({code}{reason}); "
            "the token must be replaced or given the missing category",
            cabinet_id=cabinet_id,
            endpoint=endpoint,
        )
        self.status = status
        self.detail = detail

    @property
    def token_rejected(self) -> bool:
        """The token itself is bad (malformed, expired, revoked, or not sendable at all: no status),
        as opposed to a valid token lacking a category or a method ("scope not allowed", 403)."""
        return self.status is None or (self.status == 401 and "scope" not in (self.detail or "").lower())


class WbResponseError(WbError):
    """WB answered 2xx with something that is not what the endpoint documents (bad JSON, a missing
    field, a wrong type, an unexpected 204). Nothing parsed from that response is returned."""

    def __init__(self, *, cabinet_id: str, endpoint: str, problem: str, field: str | None = None):
        where = f" at {field}" if field else ""
        super().__init__(
            f"malformed WB response for cabinet {cabinet_id!r} from {endpoint}{where}: {problem}",
            cabinet_id=cabinet_id,
            endpoint=endpoint,
        )
        self.problem = problem
        self.field = field


class WbRequestError(WbError):
    """WB refused the request itself (a 4xx other than 401/403/429), with WB's own explanation."""

    def __init__(self, *, cabinet_id: str, endpoint: str, status: int | None, detail: str):
        code = f"HTTP {status}" if status is not None else "not sent"
        super().__init__(
            f"WB refused {endpoint} for cabinet {cabinet_id!r} ({code}): {detail}",
            cabinet_id=cabinet_id,
            endpoint=endpoint,
        )
        self.status = status
        self.detail = detail


class WbUnavailable(WbError):
    """5xx, 429 or network errors that outlasted the bounded retries. Try again later."""

    is_transient = True

    def __init__(
        self, *, cabinet_id: str, endpoint: str, attempts: int, last_error: str, outcome_unknown: bool = False
    ):
        tail = (
            "; the write may or may not have been applied, and a check of WB's state could not settle it"
            if outcome_unknown
            else ""
        )
        super().__init__(
            f"WB {endpoint} unavailable for cabinet {cabinet_id!r} after {attempts} attempt(s): {last_error}{tail}",
            cabinet_id=cabinet_id,
            endpoint=endpoint,
        )
        self.attempts = attempts
        self.last_error = last_error
        self.outcome_unknown = outcome_unknown


class WbDeferred(WbError):
    """The rate limiter would make the next request wait longer than the caller may sleep.

    Raised *before* anything is sent (ADR-0051): the caller commits what it has and ends, and a
    later run resumes at ``resume_at``. Pages already returned stay valid.
    """

    is_transient = True

    def __init__(self, cabinet_id: str, group: str, resume_at: datetime, reason: str, *, endpoint: str | None = None):
        super().__init__(
            f"WB rate limit {group!r} of cabinet {cabinet_id!r} allows the next request at "
            f"{resume_at.isoformat(timespec='seconds')} ({reason}); deferring instead of sleeping",
            cabinet_id=cabinet_id,
            endpoint=endpoint,
        )
        self.group = group
        self.resume_at = resume_at
        self.reason = reason
