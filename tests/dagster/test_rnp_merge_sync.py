"""rnp-merge-sync: the nightly window, and self-healing of deleted rows and missed ticks."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest
from dagster import RunRequest, SkipReason, build_schedule_context

from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.rnp import rnp_merge_sync
from optima_pipelines.timeutil import MOSCOW
from tests.rnp_feeds import TODAY, add_cabinets, add_order, days_ago, execute_request, rnp_rows


@pytest.fixture
def cabinets(dagster_instance, warehouse_conn):
    warehouse_conn.execute(
        "INSERT INTO cabinets (id, name, status) VALUES ('c1', 'one', 'active'), ('c2', 'two', 'paused')"
    )
    add_cabinets(dagster_instance, "c1", "c2")
    for n in range(12):
        for cabinet in ("c1", "c2"):
            add_order(warehouse_conn, cabinet, f"{cabinet}-{n}", days_ago(n), 10 + n % 3, f"{100 + n}.50")


def nightly(instance, database_url, env, day: date) -> list[RunRequest]:
    with build_schedule_context(
        instance=instance,
        scheduled_execution_time=datetime.combine(day, time(6, 0), tzinfo=MOSCOW),
        resources={"warehouse": Warehouse(database_url=database_url, env=env)},
    ) as context:
        result = rnp_merge_sync(context)
    assert isinstance(result, list), result
    return result


def requested_pairs(requests: list[RunRequest]) -> set[tuple[str, date]]:
    pairs = set()
    for r in requests:
        assert [k.to_user_string() for k in r.asset_selection or []] == [
            "rnp_sales",
            "rnp_ads",
            "rnp_finance",
            "rnp_daily",
        ]
        assert r.tags["optima/queue"] == "rnp-merge-sync"
        first = r.partition_key or r.tags["dagster/asset_partition_range_start"]
        last = r.partition_key or r.tags["dagster/asset_partition_range_end"]
        (c1, d1), (c2, d2) = (k.split("|") for k in (first, last))
        assert c1 == c2
        day = date.fromisoformat(d1)
        while day <= date.fromisoformat(d2):
            pairs.add((c1, day))
            day += timedelta(1)
    return pairs


def snapshot(conn, cabinet: str, days: list[date]) -> dict:
    return {
        d: {
            nm: {k: v for k, v in row.items() if k != "updated_at"}
            for nm, row in rnp_rows(conn, "rnp_daily", cabinet, d).items()
        }
        for d in days
    }


def test_first_night_fills_every_day_with_orders_of_active_cabinets(
    dagster_instance, database_url, optima_env, cabinets, warehouse_conn
):
    requests = nightly(dagster_instance, database_url, optima_env, TODAY)
    # The 3-day window and the 9 older days with orders and no rows: one range, one run; c2 is paused.
    assert requested_pairs(requests) == {("c1", days_ago(n)) for n in range(12)}
    assert len(requests) == 1
    for r in requests:
        execute_request(dagster_instance, r)
    assert all(rnp_rows(warehouse_conn, "rnp_daily", "c1", days_ago(n)) for n in range(12))
    assert not rnp_rows(warehouse_conn, "rnp_daily", "c2", TODAY)


def test_deleted_rows_are_restored(dagster_instance, database_url, optima_env, cabinets, warehouse_conn):
    for r in nightly(dagster_instance, database_url, optima_env, TODAY):
        execute_request(dagster_instance, r)
    days = [days_ago(n) for n in range(12)]
    before = snapshot(warehouse_conn, "c1", days)
    warehouse_conn.execute(
        "DELETE FROM rnp_daily WHERE cabinet_id = 'c1' AND day = ANY(%s)", ([days_ago(4), days_ago(7), days_ago(8)],)
    )
    requests = nightly(dagster_instance, database_url, optima_env, TODAY)
    # A write to rnp_daily by anyone but the recompute forgets what its watermarks said was computed
    # (migration 0012): each of its days is due again, and the night recomputes them all, the days
    # whose rows were deleted among them (they also have orders and no rows: days_to_heal).
    assert requested_pairs(requests) == {("c1", days_ago(n)) for n in range(12)}
    assert len(requests) == 1
    for r in requests:
        execute_request(dagster_instance, r)
    assert snapshot(warehouse_conn, "c1", days) == before


def test_a_skipped_night_is_harmless(dagster_instance, database_url, optima_env, cabinets, warehouse_conn):
    # The night two days ago ran; the one after it never did (the daemon was down).
    for r in nightly(dagster_instance, database_url, optima_env, days_ago(2)):
        execute_request(dagster_instance, r)
    # Orders that arrived since, with no re-aggregation (say the sensor was off too).
    add_order(warehouse_conn, "c1", "late-2", days_ago(2), 10, "1.00")
    add_order(warehouse_conn, "c1", "late-1", days_ago(1), 10, "2.00")
    add_order(warehouse_conn, "c1", "late-0", TODAY, 10, "3.00")
    for r in nightly(dagster_instance, database_url, optima_env, TODAY):
        execute_request(dagster_instance, r)
    for n in range(12):
        orders = warehouse_conn.execute(
            "SELECT count(*), sum(price_with_disc) FROM wb_orders WHERE cabinet_id = 'c1' AND day = %s", (days_ago(n),)
        ).fetchone()
        rows = rnp_rows(warehouse_conn, "rnp_daily", "c1", days_ago(n)).values()
        assert (sum(r["orders_count"] for r in rows), sum(r["orders_sum"] for r in rows)) == orders, n


def test_a_stale_day_of_any_age_is_recomputed_by_the_next_night(
    dagster_instance, database_url, optima_env, cabinets, warehouse_conn
):
    for r in nightly(dagster_instance, database_url, optima_env, TODAY):
        execute_request(dagster_instance, r)
    # An order of 10 days ago (110.50) moves to 11 days ago (which has 111.50) behind the planner's back (no feed event names
    # either day): both days' watermarks say stale, and the checks would call their figures stale.
    warehouse_conn.execute(
        "UPDATE wb_orders SET day = %s, date = date - interval '1 day' WHERE cabinet_id = 'c1' AND srid = 'c1-10'",
        (days_ago(11),),
    )
    requests = nightly(dagster_instance, database_url, optima_env, TODAY)
    # The window, and the two stale days, whatever their age (beyond the 3-day window, both with rows).
    assert requested_pairs(requests) == {("c1", days_ago(n)) for n in (0, 1, 2, 10, 11)}
    for r in requests:
        execute_request(dagster_instance, r)
    for n, want in ((10, (0, 0)), (11, (2, Decimal("111.50") + Decimal("110.50")))):
        rows = rnp_rows(warehouse_conn, "rnp_daily", "c1", days_ago(n)).values()
        assert (sum(r["orders_count"] for r in rows), sum(r["orders_sum"] for r in rows)) == want, n
    stale = warehouse_conn.execute(
        "SELECT count(*) FROM rnp_watermarks WHERE cabinet_id = 'c1' AND recomputed <> changes"
    ).fetchone()
    assert stale == (0,)
    # Healed: the next night asks for the window alone.
    assert requested_pairs(nightly(dagster_instance, database_url, optima_env, TODAY)) == {
        ("c1", days_ago(n)) for n in (0, 1, 2)
    }


def test_nothing_to_do_is_a_skip_and_a_failed_read_says_why(dagster_instance, database_url, optima_env, warehouse_conn):
    with build_schedule_context(
        instance=dagster_instance,
        scheduled_execution_time=datetime.combine(TODAY, time(6, 0), tzinfo=MOSCOW),
        resources={"warehouse": Warehouse(database_url=database_url, env=optima_env)},
    ) as context:
        assert isinstance(rnp_merge_sync(context), SkipReason)
        warehouse_conn.execute("ALTER TABLE cabinets RENAME TO cabinets_away")
        result = rnp_merge_sync(context)
    assert isinstance(result, SkipReason) and "could not plan the nightly merge" in str(result.skip_message)
