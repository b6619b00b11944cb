"""What a sync or a re-aggregation records when it finishes, in its own transaction."""

from datetime import UTC, date, datetime, timedelta

import pytest

from optima_pipelines.errors import InvalidInput
from optima_pipelines.operations.records import record_feed_sync, record_reaggregation

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def sync(conn, **overrides):
    args = dict(
        queue="digitization-sync",
        feed="wb_orders",
        cabinet_id="shop-1",
        run_id="r1",
        trigger="scheduled",
        started_at=T0,
        finished_at=T0 + timedelta(seconds=12),
        rows_fetched=100,
        rows_inserted=60,
        rows_updated=30,
        changed_days=[date(2026, 11, 28), date(2026, 11, 29), date(2026, 11, 29)],
    )
    args.update(overrides)
    record_feed_sync(conn, **args)


#: The figures of a sync that fetched and changed nothing.
NOTHING = {"rows_fetched": 0, "rows_inserted": 0, "rows_updated": 0, "changed_days": 0}


def span(after: timedelta, seconds: float) -> dict[str, datetime]:
    """A sync that started ``after`` T0 and took ``seconds``."""
    return {"started_at": T0 + after, "finished_at": T0 + after + timedelta(seconds=seconds)}


def totals(conn):
    return conn.execute(
        "SELECT feed, cabinet_id, syncs_success, syncs_failure, rows_fetched, rows_inserted, rows_updated, "
        "changed_days, seconds_total, last_status, last_success_at FROM ops_feed_sync_totals ORDER BY 1, 2"
    ).fetchall()


def test_syncs_add_up_per_feed_and_cabinet(warehouse_conn):
    sync(warehouse_conn)
    sync(
        warehouse_conn,
        run_id="r2",
        **span(timedelta(hours=1), seconds=3),
        rows_fetched=10,
        rows_inserted=0,
        rows_updated=2,
        changed_days=1,
    )
    sync(
        warehouse_conn,
        run_id="r3",
        status="failure",
        **span(timedelta(hours=2), seconds=1),
        **NOTHING,
        error="WB answered 500",
    )
    assert totals(warehouse_conn) == [
        ("wb_orders", "shop-1", 2, 1, 110, 60, 32, 3, 16.0, "failure", T0 + timedelta(hours=1, seconds=3)),
    ]
    history = warehouse_conn.execute("SELECT run_id, status, changed_days FROM ops_feed_syncs ORDER BY id").fetchall()
    assert history == [("r1", "success", 2), ("r2", "success", 1), ("r3", "failure", 0)]


def test_a_late_older_sync_does_not_move_last_status_backwards(warehouse_conn):
    sync(warehouse_conn, run_id="new", **span(timedelta(hours=1), seconds=60))
    sync(warehouse_conn, run_id="old", status="failure", finished_at=T0 + timedelta(minutes=1), **NOTHING)
    row = totals(warehouse_conn)[0]
    assert row[9] == "success" and row[10] == T0 + timedelta(hours=1, minutes=1)


def test_the_record_rolls_back_with_the_sync_that_failed(warehouse_conn, database_url, optima_env):
    from optima_pipelines.db import transaction

    with pytest.raises(RuntimeError):
        with transaction(database_url, f"optima_{optima_env}") as conn:
            sync(conn)
            raise RuntimeError("the merge failed after recording")
    assert totals(warehouse_conn) == []
    assert warehouse_conn.execute("SELECT count(*) FROM ops_feed_syncs").fetchone() == (0,)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"queue": "digitisation"}, "unknown queue 'digitisation'"),
        ({"feed": "WB Orders"}, "feed must be lowercase"),
        ({"cabinet_id": "a|b"}, "invalid cabinet id 'a|b'"),
        ({"status": "ok"}, "status must be one of success, failure, skipped"),
        ({"rows_fetched": -1}, "rows_fetched must be a non-negative integer"),
        ({"rows_inserted": 1.5}, "rows_inserted must be a non-negative integer"),
        ({"started_at": datetime(2026, 11, 29, 9, 0)}, "started_at must be a timezone-aware datetime"),
        ({"finished_at": T0 - timedelta(seconds=1)}, "is before started_at"),
    ],
)
def test_bad_figures_are_refused_by_name_and_nothing_is_written(warehouse_conn, overrides, message):
    with pytest.raises(InvalidInput, match=message):
        sync(warehouse_conn, **overrides)
    assert totals(warehouse_conn) == []


def test_error_text_is_stored_without_a_token(warehouse_conn):
    token = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJyZWNvcmRzIn0.c2lnbmF0dXJl"
    sync(warehouse_conn, status="failure", error=f"401 for token {token}")
    (error,) = warehouse_conn.execute("SELECT error FROM ops_feed_syncs").fetchone()
    assert error == "401 for token <redacted>"


def test_reaggregations_add_up_with_their_lag(warehouse_conn):
    for i, lag in enumerate((30, 90)):
        record_reaggregation(
            warehouse_conn,
            domain="rnp-sales",
            cabinet_id="shop-1",
            run_id=f"r{i}",
            trigger="sensor",
            started_at=T0 + timedelta(seconds=lag - 5),
            finished_at=T0 + timedelta(seconds=lag),
            source_event_at=T0,
            partitions_requested=3,
            partitions_recomputed=2,
        )
    row = warehouse_conn.execute(
        "SELECT runs_success, partitions_requested, partitions_recomputed, lag_seconds_total, lag_count "
        "FROM ops_reaggregation_totals"
    ).fetchone()
    assert row == (2, 6, 4, 120.0, 2)
