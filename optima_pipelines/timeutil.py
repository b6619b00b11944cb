"""Moscow time: WB's timestamps carry no zone and mean Europe/Moscow; every business day is a Moscow day."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

MOSCOW_TZ_NAME = "Europe/Moscow"
MOSCOW = ZoneInfo(MOSCOW_TZ_NAME)


def now_moscow() -> datetime:
    return datetime.now(UTC).astimezone(MOSCOW)


def today_moscow() -> date:
    return now_moscow().date()


def as_moscow(dt: datetime) -> datetime:
    """A WB timestamp as an aware Moscow datetime (naive values are Moscow wall time)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=MOSCOW)
    return dt.astimezone(MOSCOW)
