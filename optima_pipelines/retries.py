"""How every WB sync retries (ADR-0007), in one place: the policies and the transient/permanent rule."""

from __future__ import annotations

from dagster import Backoff, Failure, Jitter, RetryPolicy

from optima_pipelines.errors import DatabaseUnavailable, OptimaError
from optima_pipelines.wb import WbError

#: ADR-0007 defaults: 5 attempts with exponential backoff from 1 s; scheduled syncs 3 attempts.
DEFAULT_RETRY = RetryPolicy(max_retries=4, delay=1, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)
SCHEDULED_RETRY = RetryPolicy(max_retries=2, delay=1, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)
#: A partition materialized by a person (UI, backfill, CLI) or a user request may wait out WB's
#: 1-request-a-minute statistics limit rather than fail: it holds its cabinet's gate either way.
#: Scheduled syncs defer instead (ADR-0051: never sleep more than 5 s in a worker).
INTERACTIVE_MAX_WAIT_SECONDS = 75.0


def fail_on_permanent(exc: Exception, what: str) -> None:
    """Turn a non-transient WB or input error into a Failure that is not retried; return otherwise.

    Transient errors are left to the retry policy: WB's 429/5xx/network trouble and a lost or
    refused database connection (a restart, a failover). What is left (a bad token, a malformed
    answer, an unknown cabinet, bad input) would fail the same way again."""
    if isinstance(exc, WbError) and getattr(exc, "is_transient", False):
        return
    if isinstance(exc, DatabaseUnavailable):
        return
    if isinstance(exc, WbError | OptimaError):
        raise Failure(description=f"{what}: {exc}", allow_retries=False) from None
