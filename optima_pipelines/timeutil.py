"""Moscow time: WB's timestamps carry no zone and mean Europe/Moscow; every business day is a Moscow day."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

MOSCOW_TZ_NAME = "Europe/Moscow"
MOSCOW = ZoneInfo(MOSCOW_TZ_NAME)


#: How far a replay of landed answers (landing/replay.py) sets the syncs' clock back: a replayed sync
#: sees the moment WB answered it, as the live sync did (its "today", a snapshot's day).
_SHIFT: ContextVar[timedelta] = ContextVar("optima_clock_shift", default=timedelta(0))


def now_moscow() -> datetime:
    return (datetime.now(UTC) + _SHIFT.get()).astimezone(MOSCOW)


@contextmanager
def clock_at(moment: datetime) -> Iterator[None]:
    """Within the block (this thread or task), ``now_moscow``/``today_moscow`` start from ``moment``
    and run on from there: a replayed sync asks "what day is it" and gets the day WB answered it."""
    token = _SHIFT.set(moment - datetime.now(UTC))
    try:
        yield
    finally:
        _SHIFT.reset(token)


def today_moscow() -> date:
    return now_moscow().date()


def as_moscow(dt: datetime) -> datetime:
    """A WB timestamp as an aware Moscow datetime (naive values are Moscow wall time)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=MOSCOW)
    return dt.astimezone(MOSCOW)
