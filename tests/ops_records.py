"""Figures in the operations tables (operations.records), for tests: a finished feed sync or
re-aggregation with the test's own moment and the other arguments at a plain default."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from optima_pipelines.operations.records import record_feed_sync, record_reaggregation


def synced(conn, queue: str, feed: str, cabinet_id: str, at: datetime, seconds: float = 1, **kw: Any) -> None:
    """A scheduled sync of ``feed`` for the cabinet that took ``seconds`` and finished ``at``."""
    record_feed_sync(
        conn,
        queue=queue,
        feed=feed,
        cabinet_id=cabinet_id,
        run_id="r",
        trigger="scheduled",
        started_at=at - timedelta(seconds=seconds),
        finished_at=at,
        **kw,
    )


def reaggregated(conn, now: datetime, *, lag_seconds: float, partitions: int = 0) -> None:
    """One finished rnp-sales recompute of cabinet 'a', its source change ``lag_seconds`` before ``now``."""
    record_reaggregation(
        conn,
        domain="rnp-sales",
        cabinet_id="a",
        run_id="r",
        trigger="sensor",
        started_at=now - timedelta(seconds=2),
        finished_at=now,
        source_event_at=now - timedelta(seconds=lag_seconds),
        partitions_requested=partitions,
        partitions_recomputed=partitions,
    )
