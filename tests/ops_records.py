"""Figures in the operations tables (operations.records), for tests: a finished feed sync or
re-aggregation with the test's own moment and the other arguments at a plain default; and a /metrics
scrape in which every family has series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import asset, materialize
from prometheus_client import generate_latest

from optima_pipelines.operations.metrics import build_registry
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


@asset
def broken_for_the_scrape() -> None:
    raise RuntimeError("this run fails")


def full_scrape(dagster_instance, conn, database_url: str, settings) -> str:
    """A scrape in which every family has series: syncs of each family's feeds, one cabinet stale with
    a rejected token, a failed run, a re-aggregation."""
    now = datetime.now(UTC)
    conn.execute("INSERT INTO cabinets (id, name) VALUES ('a', 'A')")
    conn.execute("INSERT INTO cabinets (id, name, status) VALUES ('b', 'B', 'token_invalid')")
    for queue, feed in (
        ("digitization-sync", "wb_orders"),
        ("rnp-ads-sync", "ad_campaign_stats"),
        ("inventory-sync", "stocks"),
    ):
        for cabinet in ("a", "b"):
            synced(conn, queue, feed, cabinet, now, seconds=5, changed_days=1)
    reaggregated(conn, now, lag_seconds=9)
    tags = {"optima/queue": "example-jobs"}
    assert not materialize([broken_for_the_scrape], instance=dagster_instance, tags=tags, raise_on_error=False).success
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    try:
        return generate_latest(registry).decode()
    finally:
        collector.close()
