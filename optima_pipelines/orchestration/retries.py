"""How every WB sync retries (ADR-0007), in one place: the policies and the transient/permanent rule."""

from __future__ import annotations

import psycopg
from dagster import Backoff, Failure, Jitter, RetryPolicy

from optima_pipelines.errors import DatabaseUnavailable, OptimaError
from optima_pipelines.warehouse.cabinet_lock import CabinetBusy
from optima_pipelines.wb import WbError

#: ADR-0007 defaults: 5 attempts with exponential backoff from 1 s; scheduled syncs 3 attempts.
DEFAULT_RETRY = RetryPolicy(max_retries=4, delay=1, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)
SCHEDULED_RETRY = RetryPolicy(max_retries=2, delay=1, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)
#: A partition materialized by a person (UI, backfill, CLI) or a user request may wait out WB's
#: 1-request-a-minute statistics limit rather than fail: it holds its cabinet's gate either way.
#: Scheduled syncs defer instead (ADR-0051: never sleep more than 5 s in a worker).
INTERACTIVE_MAX_WAIT_SECONDS = 75.0

#: SQLSTATE classes of PostgreSQL errors that can go away on their own: connection exception (08),
#: transaction rollback (40: serialization failure, deadlock), insufficient resources (53), operator
#: intervention (57: shutdown, a cancelled statement). Every other class (22 data, 23 integrity,
#: 42 syntax or access, ...) fails the same way again.
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may succeed when tried again: WB's 429/5xx/network trouble, a database that
    cannot be reached, a cabinet another run held too long (CabinetBusy), and PostgreSQL errors of
    a transient SQLSTATE class (a connection lost with no SQLSTATE counts as one). Everything else,
    including bugs, is permanent."""
    if isinstance(exc, WbError):
        return bool(exc.is_transient)
    if isinstance(exc, DatabaseUnavailable | CabinetBusy):
        return True
    if isinstance(exc, psycopg.Error):
        if exc.sqlstate is None:
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return exc.sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES
    return False


def describe(exc: BaseException) -> str:
    """The cause as a person should read it: a PostgreSQL error with its class and SQLSTATE."""
    if isinstance(exc, psycopg.Error):
        state = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
        return f"database error {exc.__class__.__name__}{state}: {str(exc).strip()}"
    return str(exc)


def fail_on_permanent(exc: Exception, what: str) -> None:
    """Turn a permanent WB, database or input error into a Failure that is not retried (its
    description names the cause); return for a transient one, which the retry policy retries.

    Transient is ``is_transient``'s rule. What is left (a bad token, a malformed answer, an unknown
    cabinet, bad input, a value the database refuses) would fail the same way again."""
    if is_transient(exc):
        return
    if isinstance(exc, WbError | OptimaError | psycopg.Error):
        raise Failure(description=f"{what}: {describe(exc)}", allow_retries=False) from None
