"""The sales funnel against the WB simulator: per product and day, re-runs, a partition, deferral, faults."""

from __future__ import annotations

import os
from collections import Counter
from datetime import timedelta

import pytest
from dagster import materialize

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import funnel
from optima_pipelines.sync.state import get_state
from optima_pipelines.timeutil import today_moscow
from tests.wb_syncs import (
    advance_until_changed,
    latest_storage_id,
    materializations,
    money,
    run_job,
    served,
    simulator,
    wait_until,
)
from wb_simulator import CabinetSpec

FIELDS = {
    "open_count": "openCount",
    "cart_count": "cartCount",
    "order_count": "orderCount",
    "order_sum": "orderSum",
    "buyout_count": "buyoutCount",
    "buyout_sum": "buyoutSum",
    "buyout_percent": "buyoutPercent",
    "add_to_cart_conversion": "addToCartConversion",
    "cart_to_order_conversion": "cartToOrderConversion",
    "add_to_wishlist_count": "addToWishlistCount",
}


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=25, orders_per_day=80, history_days=30, campaigns=1))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def funnel_in_warehouse(conn, cabinet: str) -> dict[tuple, tuple]:
    rows = conn.execute(
        f"SELECT day, nm_id, {', '.join(FIELDS)} FROM rnp_funnel_stats WHERE cabinet_id = %s", (cabinet,)
    ).fetchall()
    return {(r[0], r[1]): tuple(r[2:]) for r in rows}


def funnel_of_truth(sim, cabinet: str, days) -> dict[tuple, tuple]:
    return {
        (day, nm): tuple(money(f[name]) for name in FIELDS.values())
        for day in days
        for nm, f in sim.truth.funnel(cabinet, day).items()
    }


def test_the_hourly_sync_keeps_each_products_day(wb, warehouse_conn, dagster_instance):
    assert run_job("funnel_sync", dagster_instance, "c1", tags={"optima/trigger": "schedule"}).success
    days = funnel.funnel_window()
    truth = funnel_of_truth(wb, "c1", days)
    assert len(truth) > 30
    assert funnel_in_warehouse(warehouse_conn, "c1") == truth
    mats = materializations(dagster_instance, "rnp_funnel_stats")
    per_day = Counter(day for day, _ in truth)
    assert {k: m["rows_inserted"] for k, m in mats.items()} == {f"c1|{d}": n for d, n in per_day.items()}

    mark = latest_storage_id(dagster_instance)
    assert run_job("funnel_sync", dagster_instance, "c1").success
    assert materializations(dagster_instance, "rnp_funnel_stats", mark) == {}

    # Time passes: today's figures grow, and only the days whose figures changed are reported, each
    # with its new and its changed rows. (Judged against WB's own figures before and after: in the
    # first hours after Moscow midnight today has no row yet, so its first rows are inserts.)
    after = advance_until_changed(wb, timedelta(hours=2), lambda: funnel_of_truth(wb, "c1", days), truth)
    expected: dict[str, dict[str, int]] = {}
    for (day, nm), figures in after.items():
        if truth.get((day, nm)) != figures:
            counts = expected.setdefault(f"c1|{day}", {"rows_inserted": 0, "rows_updated": 0})
            counts["rows_inserted" if (day, nm) not in truth else "rows_updated"] += 1
    assert expected, "a whole simulated day changed no funnel figure; the test needs a busier cabinet"
    mark = latest_storage_id(dagster_instance)
    assert run_job("funnel_sync", dagster_instance, "c1").success
    assert funnel_in_warehouse(warehouse_conn, "c1") == after
    changed = materializations(dagster_instance, "rnp_funnel_stats", mark)
    assert {k: {c: m[c] for c in ("rows_inserted", "rows_updated")} for k, m in changed.items()} == expected


def test_a_partition_keeps_an_old_day_wb_no_longer_details(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.funnel import rnp_funnel_stats

    day = today_moscow() - timedelta(days=20)  # older than the history endpoint's week
    result = materialize([rnp_funnel_stats], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance)
    assert result.success
    assert funnel_in_warehouse(warehouse_conn, "c1") == funnel_of_truth(wb, "c1", [day])


def test_days_wb_would_make_wait_for_are_resumed(wb, warehouse_conn):
    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    days = [today_moscow() - timedelta(days=n) for n in range(6, 0, -1)]
    runs = []
    for _ in range(10):
        # WB's 20 s become 2 s: the burst of 3 goes at once, each request after it must wait.
        with WbApi(warehouse=warehouse, time_scale=10).client("c1", max_wait_seconds=0) as client:
            run = funnel.sync_funnel(
                warehouse.connect,
                client,
                "c1",
                days if not runs else [],
                run_id=None,
                trigger="scheduled",
                state_feed=funnel.STATE_FEED,
            )
        runs.append(run)
        if run.deferred_until is None:
            break
        wait_until(run.deferred_until)
    # WB's burst of 3 went at once; the rest came one by one, each after its resume.
    assert runs[0].requests == 3 and runs[0].deferred_until is not None
    assert runs[-1].deferred_until is None and sum(r.requests for r in runs) == len(days)
    assert get_state(warehouse_conn, "c1", funnel.STATE_FEED).cursor == {"pending": []}
    assert funnel_in_warehouse(warehouse_conn, "c1") == funnel_of_truth(wb, "c1", days)


def test_a_fault_storm_still_ends_with_wbs_funnel(wb, warehouse_conn, dagster_instance):
    storm = wb.faults.set("POST analytics/api/analytics/v3/sales-funnel/products", error_rate=0.4, rate_429=0.2)
    for attempt in range(8):
        assert run_job("funnel_sync", dagster_instance, "c1").success
        if attempt >= 1 and get_state(warehouse_conn, "c1", funnel.STATE_FEED).resume_at is None:
            break
    wb.faults.clear()
    assert storm.fired > 0
    assert funnel_in_warehouse(warehouse_conn, "c1") == funnel_of_truth(wb, "c1", funnel.funnel_window())


def test_a_failure_on_a_later_day_keeps_the_days_before_it_and_the_days_to_go(wb, warehouse_conn, dagster_instance):
    days = funnel.funnel_window()
    wb.faults.set("POST analytics/api/analytics/v3/sales-funnel/products", truncate=True, after=1, times=1)

    assert not run_job("funnel_sync", dagster_instance, "c1").success  # the second day's answer is broken
    assert funnel_in_warehouse(warehouse_conn, "c1") == funnel_of_truth(wb, "c1", days[:1])
    assert get_state(warehouse_conn, "c1", funnel.STATE_FEED).cursor == {"pending": [d.isoformat() for d in days[1:]]}
    assert set(materializations(dagster_instance, "rnp_funnel_stats")) == {f"c1|{days[0]}"}  # reported all the same

    assert run_job("funnel_sync", dagster_instance, "c1").success
    assert funnel_in_warehouse(warehouse_conn, "c1") == funnel_of_truth(wb, "c1", days)
