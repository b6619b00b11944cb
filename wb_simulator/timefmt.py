"""Time in the simulator: integer Unix seconds inside, WB's string forms outside.

WB's statistics timestamps are naive Moscow wall time. Moscow has been UTC+3 all year since 2014, so
a fixed offset is exact here and much faster than a zone lookup per row.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta, timezone

MSK_OFFSET = 3 * 3600
MSK = timezone(timedelta(seconds=MSK_OFFSET), "MSK")
DAY = 86400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day_number(ts: float) -> int:
    """The Moscow day of a Unix time, as days since 1970-01-01."""
    return int(ts + MSK_OFFSET) // DAY


def day_start(dn: int) -> int:
    """Unix time of Moscow midnight opening day ``dn``."""
    return dn * DAY - MSK_OFFSET


def dn_to_date(dn: int) -> date:
    return date.fromordinal(_EPOCH_ORDINAL + dn)


def date_to_dn(d: date) -> int:
    return d.toordinal() - _EPOCH_ORDINAL


def msk_naive(ts: int) -> str:
    """``2026-08-01T12:34:56``: Moscow wall time without a zone, WB's statistics format."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts + MSK_OFFSET))


def msk_offset(ts: float) -> str:
    """``2026-08-01T12:34:56+03:00``."""
    return datetime.fromtimestamp(int(ts), MSK).isoformat()


def utc_z(ts: int) -> str:
    """``2026-08-01T09:34:56Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def to_ts(value: datetime | date) -> int:
    """Unix seconds of a datetime (naive means Moscow) or of Moscow midnight of a date."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=MSK)
        return int(value.timestamp())
    return day_start(date_to_dn(value))


def parse_wb_datetime(text: str) -> int | None:
    """WB's RFC 3339 date or date-time (naive = Moscow) → Unix seconds; None when it is not one."""
    text = text.strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            return to_ts(date.fromisoformat(text))
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return None
    return int(value.replace(tzinfo=value.tzinfo or MSK).timestamp() // 1)


def now_ts() -> float:
    return datetime.now(UTC).timestamp()
