"""Stocks against the WB simulator: today's snapshot, replaced by the next one, kept for earlier days."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dagster import materialize

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.timeutil import today_moscow
from tests.wb_syncs import advance_until_changed, latest_storage_id, materializations, run_job, served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=30, orders_per_day=150, history_days=20, campaigns=1))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def stocks_in_warehouse(conn, day) -> dict[tuple, tuple]:
    rows = conn.execute(
        "SELECT nm_id, chrt_id, warehouse_id, quantity, in_way_to_client, in_way_from_client FROM stocks "
        "WHERE cabinet_id = 'c1' AND day = %s",
        (day,),
    ).fetchall()
    return {tuple(r[:3]): tuple(r[3:]) for r in rows}


def stocks_of_truth(sim) -> dict[tuple, tuple]:
    return {
        (s["nmId"], s["chrtId"], s["warehouseId"]): (s["quantity"], s["inWayToClient"], s["inWayFromClient"])
        for s in sim.truth.stocks("c1")
    }


def test_the_days_snapshot_is_wbs_latest(wb, warehouse_conn, dagster_instance):
    today = today_moscow()
    assert run_job("inventory_sync", dagster_instance, "c1", tags={"optima/trigger": "schedule"}).success
    first = stocks_of_truth(wb)
    assert stocks_in_warehouse(warehouse_conn, today) == first
    meta = materializations(dagster_instance, "stocks")[f"c1|{today}"]
    assert (meta["rows_fetched"], meta["rows_inserted"], meta["trigger"]) == (len(first), len(first), "scheduled")

    mark = latest_storage_id(dagster_instance)
    assert run_job("inventory_sync", dagster_instance, "c1").success
    assert materializations(dagster_instance, "stocks", mark) == {}

    # An hour of orders later the snapshot replaces the day's rows; only the changed ones are written.
    later = advance_until_changed(wb, timedelta(hours=1), lambda: stocks_of_truth(wb), first)
    assert later != first, "a whole simulated day moved no stock; the test needs a busier cabinet"
    assert run_job("inventory_sync", dagster_instance, "c1").success
    assert stocks_in_warehouse(warehouse_conn, today) == later
    changed = sum(1 for k in later if later[k] != first.get(k))
    assert materializations(dagster_instance, "stocks", mark)[f"c1|{today}"]["rows_updated"] == changed


def test_an_earlier_day_cannot_be_taken_again(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.inventory import stocks

    day = today_moscow() - timedelta(days=2)
    result = materialize(
        [stocks], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance, raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "WB serves only the stocks of now" in failure.event_specific_data.error.message
    assert warehouse_conn.execute("SELECT count(*) FROM stocks").fetchone()[0] == 0
