"""The client-side WB rate limiter: a token bucket per (cabinet, WB limit group), shared and persisted.

The bucket is kept as GCRA state (the "generic cell rate algorithm", an exact token bucket
expressed as timestamps): ``bucket_full_at`` is when the bucket is full again and
``next_allowed_at`` when the next request may be sent, which also carries any pause WB imposed
(a 429's ``X-Ratelimit-Retry``). Timestamps rather than token counts make the state meaningful to
another process later: a run that starts after a previous run of the same cabinet learned a pause
reads ``next_allowed_at`` from PostgreSQL (table ``wb_rate_limits``) and honours it.

Why not a library: the rate-limiting packages on PyPI (pyrate-limiter, limits, token-bucket) count
requests in windows or keep tokens in memory/Redis; none keeps a PostgreSQL row of "next allowed
at" that a 429 can push forward and that can be asked how long the next request would wait without
spending anything. The math is a dozen lines; the stores below hold it.

Every reservation is atomic per (cabinet, group): in memory under a process-wide lock, in
PostgreSQL under the row's lock (``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` locks it).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import psycopg

from optima_pipelines.wb.errors import WbDeferred
from optima_pipelines.wb.limits import LimitRule

T = TypeVar("T")


@dataclass(frozen=True)
class BucketState:
    """Epoch seconds. A bucket never seen is full: both timestamps in the past."""

    next_allowed_at: float = 0.0
    bucket_full_at: float = 0.0
    #: The last pause WB imposed (a 429) and why; kept for the deferral message and for operators.
    paused_until: float = 0.0
    reason: str | None = None


_EPSILON = 1e-3


def _tolerance(rule: LimitRule) -> float:
    return (rule.burst - 1) * rule.interval


def reserve(state: BucketState, rule: LimitRule, now: float) -> tuple[BucketState, float]:
    """Take one request's slot: the new state and the seconds to wait before sending it."""
    # Sub-millisecond waits are float noise of epoch arithmetic, not WB's limits.
    start = state.next_allowed_at if state.next_allowed_at > now + _EPSILON else now
    full_at = max(state.bucket_full_at, start) + rule.interval
    return replace(state, next_allowed_at=full_at - _tolerance(rule), bucket_full_at=full_at), start - now


def pause(state: BucketState, rule: LimitRule, now: float, seconds: float, reason: str) -> BucketState:
    """WB said: nothing before ``now + seconds`` (a 429). WB's bucket is then empty: after the
    pause one request goes, the rest at the sustained rate."""
    until = now + seconds
    full_at = max(state.bucket_full_at, until + _tolerance(rule))
    return BucketState(max(state.next_allowed_at, until), full_at, max(state.paused_until, until), reason)


def observe_remaining(state: BucketState, rule: LimitRule, now: float, remaining: int) -> BucketState | None:
    """WB's ``X-Ratelimit-Remaining`` after a success. When WB counts fewer requests left than our
    bucket (another client spends the same budget), drain ours to match; None when nothing changes."""
    remaining = max(0, min(remaining, rule.burst))
    full_at = now + (rule.burst - remaining) * rule.interval
    if full_at <= state.bucket_full_at + 1e-6:
        return None
    return replace(
        state, next_allowed_at=max(state.next_allowed_at, full_at - _tolerance(rule)), bucket_full_at=full_at
    )


class LimiterStore(Protocol):
    """Where bucket states live. ``update`` runs ``change`` atomically for one (cabinet, group)."""

    def update(self, cabinet_id: str, group: str, change: Callable[[BucketState], tuple[BucketState | None, T]]) -> T:
        """Apply ``change`` to the current state under a lock; a None new state writes nothing."""
        ...

    def get(self, cabinet_id: str, group: str) -> BucketState: ...


class MemoryLimiterStore:
    """Bucket states in this process's memory. ``MemoryLimiterStore.process_wide()`` is the one
    instance every client of the process shares when no store is given."""

    _shared: MemoryLimiterStore | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], BucketState] = {}
        self._lock = threading.Lock()

    @classmethod
    def process_wide(cls) -> MemoryLimiterStore:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def update(self, cabinet_id: str, group: str, change: Callable[[BucketState], tuple[BucketState | None, T]]) -> T:
        with self._lock:
            new, result = change(self._states.get((cabinet_id, group), BucketState()))
            if new is not None:
                self._states[(cabinet_id, group)] = new
            return result

    def get(self, cabinet_id: str, group: str) -> BucketState:
        with self._lock:
            return self._states.get((cabinet_id, group), BucketState())


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _state(row: tuple) -> BucketState:
    return BucketState(row[0].timestamp(), row[1].timestamp(), row[2].timestamp(), row[3])


class PostgresLimiterStore:
    """Bucket states in the warehouse table ``wb_rate_limits`` (migration 0002_wb_client), so that
    every process of the deployment, and the next run of a cabinet, sees the same buckets.

    ``connect`` returns a new psycopg connection whose search_path is the environment's schema
    (e.g. ``Warehouse.connect``); each operation uses one short transaction of its own.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection]):
        self._connect = connect

    def __repr__(self) -> str:
        return "PostgresLimiterStore()"

    def update(self, cabinet_id: str, group: str, change: Callable[[BucketState], tuple[BucketState | None, T]]) -> T:
        with self._connect() as conn, conn.transaction():
            # Creates the row if needed and, either way, locks it until the transaction ends.
            row = conn.execute(
                """INSERT INTO wb_rate_limits (cabinet_id, limit_group) VALUES (%s, %s)
                ON CONFLICT (cabinet_id, limit_group) DO UPDATE SET cabinet_id = EXCLUDED.cabinet_id
                RETURNING next_allowed_at, bucket_full_at, paused_until, reason""",
                (cabinet_id, group),
            ).fetchone()
            assert row is not None
            new, result = change(_state(row))
            if new is not None:
                conn.execute(
                    """UPDATE wb_rate_limits
                    SET next_allowed_at = %s, bucket_full_at = %s, paused_until = %s, reason = %s,
                        updated_at = now()
                    WHERE cabinet_id = %s AND limit_group = %s""",
                    (
                        _dt(new.next_allowed_at),
                        _dt(new.bucket_full_at),
                        _dt(new.paused_until),
                        new.reason,
                        cabinet_id,
                        group,
                    ),
                )
            return result

    def get(self, cabinet_id: str, group: str) -> BucketState:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT next_allowed_at, bucket_full_at, paused_until, reason FROM wb_rate_limits "
                "WHERE cabinet_id = %s AND limit_group = %s",
                (cabinet_id, group),
            ).fetchone()
        return BucketState() if row is None else _state(row)


class RateLimiter:
    """Token buckets per (cabinet, limit group) over a store; the client asks it before each request.

    ``acquire`` sleeps a wait up to ``max_wait`` seconds and otherwise raises ``WbDeferred`` without
    taking the slot; ``wait_time`` answers how long the next request would wait, spending nothing.
    """

    def __init__(
        self,
        store: LimiterStore | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.store: LimiterStore = store if store is not None else MemoryLimiterStore.process_wide()
        self._clock = clock
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"RateLimiter({self.store!r})"

    def wait_time(self, cabinet_id: str, group: str) -> float:
        """Seconds the next request of this cabinet and group would wait now (0 when it may go)."""
        return max(0.0, self.store.get(cabinet_id, group).next_allowed_at - self._clock())

    def next_allowed_at(self, cabinet_id: str, group: str) -> datetime:
        return _dt(max(self.store.get(cabinet_id, group).next_allowed_at, self._clock()))

    def acquire(
        self, cabinet_id: str, group: str, rule: LimitRule, *, max_wait: float, endpoint: str | None = None
    ) -> float:
        """Take the slot of one request and sleep until it; returns the seconds slept."""
        now = self._clock()

        def take(state: BucketState) -> tuple[BucketState | None, tuple[float, BucketState]]:
            new, wait = reserve(state, rule, now)
            if wait > max_wait:
                return None, (wait, state)
            return new, (wait, state)

        wait, before = self.store.update(cabinet_id, group, take)
        if wait > max_wait:
            if before.paused_until > now and before.reason:
                reason = before.reason
            else:
                reason = f"WB allows {rule.limit} request(s) per {_human(rule.period_seconds)}, burst {rule.burst}"
            raise WbDeferred(cabinet_id, group, _dt(now + wait), reason, endpoint=endpoint)
        if wait > 0:
            self._sleep(wait)
        return wait

    def record_pause(self, cabinet_id: str, group: str, rule: LimitRule, seconds: float, reason: str) -> None:
        """Nothing may be sent in this group for ``seconds`` (a 429's X-Ratelimit-Retry); persisted."""
        now = self._clock()
        self.store.update(cabinet_id, group, lambda s: (pause(s, rule, now, seconds, reason), None))

    def observe_remaining(self, cabinet_id: str, group: str, rule: LimitRule, remaining: int) -> None:
        now = self._clock()
        self.store.update(cabinet_id, group, lambda s: (observe_remaining(s, rule, now, remaining), None))


def _human(seconds: float) -> str:
    if seconds >= 3600 and math.isclose(seconds % 3600, 0):
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and math.isclose(seconds % 60, 0):
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


__all__ = [
    "BucketState",
    "LimiterStore",
    "MemoryLimiterStore",
    "PostgresLimiterStore",
    "RateLimiter",
    "observe_remaining",
    "pause",
    "reserve",
]
