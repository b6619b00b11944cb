"""What syncs and re-aggregations record when they finish: the figures behind /metrics.

Feature code calls these inside its own transaction, so the figures commit (or roll back) with
the data they describe:

    with warehouse.transaction() as conn:
        ... merge the rows ...
        record_feed_sync(conn, queue=DIGITIZATION_SYNC, feed="wb_orders", cabinet_id=cabinet,
                         run_id=context.run_id, trigger="scheduled", started_at=started,
                         rows_fetched=n, rows_inserted=i, rows_updated=u, changed_days=days)

A failed sync records ``status="failure"`` in a separate transaction after its rollback (its data
transaction is gone). Nothing here commits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime

import psycopg

from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.errors import InvalidInput
from optima_pipelines.logs import redact
from optima_pipelines.orchestration.queues import (
    DIGITIZATION_SYNC,
    QUEUES,
    RNP_ADS_SYNC,
    RNP_FINANCE_SYNC,
    RNP_SECTIONS_SYNC,
)
from optima_pipelines.warehouse.cabinets import validate_cabinet_id

load = SqlFiles(__file__)

STATUSES = ("success", "failure", "skipped")
NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
MAX_ERROR_CHARS = 2000

#: Which /metrics family a queue's feed syncs are counted under (the original's names).
#: Feeds of any other queue (catalog, inventory, news...) are counted under ``optima_feed_sync_*``.
METRIC_FAMILIES: dict[str, str] = {
    DIGITIZATION_SYNC: "optima_digitization_feed_sync",
    RNP_FINANCE_SYNC: "optima_rnp_sync",
    RNP_ADS_SYNC: "optima_rnp_sync",
    RNP_SECTIONS_SYNC: "optima_rnp_sync",
}
DEFAULT_METRIC_FAMILY = "optima_feed_sync"


def metric_family(queue: str) -> str:
    return METRIC_FAMILIES.get(queue, DEFAULT_METRIC_FAMILY)


def _name(field: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidInput(f"{field} must be lowercase letters, digits, '_' or '-' (at most 63), got {value!r}")
    return value


def _count(field: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{field} must be a non-negative integer, got {value!r}")
    return value


def _moment(field: str, value: datetime | None, default: datetime | None = None) -> datetime:
    if value is None:
        if default is None:
            raise InvalidInput(f"{field} is required")
        return default
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(f"{field} must be a timezone-aware datetime, got {value!r}")
    return value


def _common(
    *, cabinet_id: str, trigger: str, status: str, started_at: datetime, finished_at: datetime | None
) -> tuple[datetime, datetime]:
    validate_cabinet_id(cabinet_id)
    _name("trigger", trigger)
    if status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    started = _moment("started_at", started_at)
    finished = _moment("finished_at", finished_at, datetime.now(UTC))
    if finished < started:
        raise InvalidInput(f"finished_at {finished.isoformat()} is before started_at {started.isoformat()}")
    return started, finished


def _error(error: str | None) -> str | None:
    return redact(error)[:MAX_ERROR_CHARS] if error else None


def record_feed_sync(
    conn: psycopg.Connection,
    *,
    queue: str,
    feed: str,
    cabinet_id: str,
    run_id: str | None,
    trigger: str,
    started_at: datetime,
    finished_at: datetime | None = None,
    status: str = "success",
    rows_fetched: int = 0,
    rows_inserted: int = 0,
    rows_updated: int = 0,
    changed_days: int | Iterable[date] = 0,
    error: str | None = None,
    confirmed: bool | None = None,
) -> None:
    """Record one finished sync of ``feed`` (a table/asset name, e.g. ``wb_orders``) for one cabinet.

    ``queue`` is the original queue (``queues.QUEUES``) and picks the metric family;
    ``changed_days`` is a count or the days themselves. ``confirmed`` (default: a success) says the
    sync went to the end of WB's data, whether or not anything changed: the cabinet's feed is fresh
    as of ``finished_at`` (``ops_feed_sync_totals.confirmed_at``, what ``operations.freshness`` reads); a
    success that WB deferred half-way is not. Raises InvalidInput naming a bad argument, before
    anything is written.
    """
    if queue not in QUEUES:
        raise InvalidInput(f"unknown queue {queue!r}: expected one of queues.QUEUES")
    _name("feed", feed)
    started, finished = _common(
        cabinet_id=cabinet_id, trigger=trigger, status=status, started_at=started_at, finished_at=finished_at
    )
    days = changed_days if isinstance(changed_days, int) else len(set(changed_days))
    if confirmed is None:
        confirmed = status == "success"
    elif confirmed and status != "success":
        raise InvalidInput(f"a {status} sync cannot confirm WB's data: confirmed must be False")
    conn.execute(
        load("record_feed_sync"),
        {
            "queue": queue,
            "feed": feed,
            "cabinet_id": cabinet_id,
            "run_id": run_id,
            "trigger": trigger,
            "status": status,
            "rows_fetched": _count("rows_fetched", rows_fetched),
            "rows_inserted": _count("rows_inserted", rows_inserted),
            "rows_updated": _count("rows_updated", rows_updated),
            "changed_days": _count("changed_days", days),
            "started_at": started,
            "finished_at": finished,
            "error": _error(error),
            "confirmed": bool(confirmed),
        },
    )


def record_reaggregation(
    conn: psycopg.Connection,
    *,
    domain: str,
    cabinet_id: str,
    run_id: str | None,
    trigger: str,
    started_at: datetime,
    finished_at: datetime | None = None,
    status: str = "success",
    partitions_requested: int = 0,
    partitions_recomputed: int = 0,
    source_event_at: datetime | None = None,
    error: str | None = None,
) -> None:
    """Record one finished re-aggregation of a РНП ``domain`` (rnp-sales, rnp-ads, rnp-finance, merge...).

    ``source_event_at`` is when the change that asked for it was made (since when the pair was due,
    ``assets.rnp.TAG_SOURCE_EVENT_AT``): the lag metrics measure from there to ``finished_at``.
    """
    _name("domain", domain)
    started, finished = _common(
        cabinet_id=cabinet_id, trigger=trigger, status=status, started_at=started_at, finished_at=finished_at
    )
    source = _moment("source_event_at", source_event_at, None) if source_event_at is not None else None
    requested = _count("partitions_requested", partitions_requested)
    recomputed = _count("partitions_recomputed", partitions_recomputed)
    conn.execute(
        load("record_reaggregation"),
        {
            "domain": domain,
            "cabinet_id": cabinet_id,
            "run_id": run_id,
            "trigger": trigger,
            "status": status,
            "partitions_requested": requested,
            "partitions_recomputed": recomputed,
            "source_event_at": source,
            "started_at": started,
            "finished_at": finished,
            "error": _error(error),
        },
    )
