"""Ad campaigns and statistics against the WB simulator: truth, re-runs, associated products, deferral and resume, faults."""

from __future__ import annotations

import os
from collections import Counter
from datetime import timedelta

import pytest
from dagster import build_sensor_context, materialize

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncInput
from optima_pipelines.sync.state import get_state
from optima_pipelines.timeutil import today_moscow
from tests.wb_syncs import latest_storage_id, materializations, money, run_job, served, simulator, wait_until
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(
        CabinetSpec(id="c1", products=25, orders_per_day=80, history_days=30, campaigns=8),
        # Enough campaigns with statistics for two fullstats requests (≤ 50 campaigns each).
        CabinetSpec(id="c2", products=30, orders_per_day=20, history_days=30, campaigns=90),
    )
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def stats_in_warehouse(conn, cabinet: str) -> dict[tuple, tuple]:
    rows = conn.execute(
        "SELECT advert_id, day, app_type, nm_id, views, clicks, atbs, orders, shks, canceled, sum, sum_price, "
        "is_associated FROM ad_campaign_stats WHERE cabinet_id = %s",
        (cabinet,),
    ).fetchall()
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}


def stats_of_truth(sim, cabinet: str, days) -> dict[tuple, tuple]:
    advertised = {(c["id"], p["nm_id"]) for c in sim.truth.campaigns(cabinet) for p in c["nm_settings"] or ()}
    out = {}
    for day in days:
        for advert, row in sim.truth.ad_stats(cabinet, day).items():
            for app in row["apps"]:
                for nm in app["nms"]:
                    out[(advert, day, app["appType"], nm["nmId"])] = (
                        nm["views"],
                        nm["clicks"],
                        nm["atbs"],
                        nm["orders"],
                        nm["shks"],
                        nm["canceled"],
                        money(nm["sum"]),
                        money(nm["sum_price"]),
                        (advert, nm["nmId"]) not in advertised,
                    )
    return out


def campaigns_in_warehouse(conn, cabinet: str) -> dict[int, tuple]:
    rows = conn.execute(
        "SELECT c.advert_id, c.status, c.bid_type, c.payment_type, "
        "array_agg((p.nm_id, p.bid_search_kopecks, p.bid_recommendations_kopecks)::text ORDER BY p.nm_id) "
        "FILTER (WHERE p.nm_id IS NOT NULL) "
        "FROM ad_campaigns c LEFT JOIN ad_campaign_products p USING (cabinet_id, advert_id) "
        "WHERE c.cabinet_id = %s GROUP BY 1, 2, 3, 4",
        (cabinet,),
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3], r[4] or []) for r in rows}


def campaigns_of_truth(sim, cabinet: str) -> dict[int, tuple]:
    return {
        c["id"]: (
            c["status"],
            c["bid_type"],
            c["settings"]["payment_type"],
            [
                f"({p['nm_id']},{p['bids_kopecks']['search']},{p['bids_kopecks']['recommendations']})"
                for p in sorted(c["nm_settings"] or (), key=lambda p: p["nm_id"])
            ],
        )
        for c in sim.truth.campaigns(cabinet)
    }


def test_the_sync_equals_wb_and_a_rerun_changes_nothing(wb, warehouse_conn, dagster_instance):
    result = run_job("ads_sync", dagster_instance, "c1", tags={"optima/trigger": "schedule"})
    assert result.success
    begin, end = ads.ads_window()
    days = [begin + timedelta(days=n) for n in range((end - begin).days + 1)]

    assert campaigns_in_warehouse(warehouse_conn, "c1") == campaigns_of_truth(wb, "c1")
    truth = stats_of_truth(wb, "c1", days)
    assert len(truth) > 50
    assert stats_in_warehouse(warehouse_conn, "c1") == truth
    assert any(v[-1] for v in truth.values()), "associated products are kept, flagged"

    per_day = Counter(key[1] for key in truth)
    mats = materializations(dagster_instance, "ad_campaign_stats")
    assert set(mats) == {f"c1|{d}" for d in per_day}
    for day, n in per_day.items():
        meta = mats[f"c1|{day}"]
        assert (meta["rows_fetched"], meta["rows_inserted"], meta["rows_updated"], meta["trigger"]) == (
            n,
            n,
            0,
            "scheduled",
        )
    assert set(materializations(dagster_instance, "ad_campaigns")) == {"c1"}

    mark = latest_storage_id(dagster_instance)
    assert run_job("ads_sync", dagster_instance, "c1").success
    assert materializations(dagster_instance, "ad_campaign_stats", mark) == {}
    assert materializations(dagster_instance, "ad_campaigns", mark) == {}
    assert stats_in_warehouse(warehouse_conn, "c1") == truth


def test_a_partition_reloads_its_day(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.ads import ad_campaign_stats

    day = today_moscow() - timedelta(days=6)
    result = materialize([ad_campaign_stats], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance)
    assert result.success
    assert stats_in_warehouse(warehouse_conn, "c1") == stats_of_truth(wb, "c1", [day])
    (meta,) = [
        m.metadata
        for m in result.asset_materializations_for_node("ad_campaign_stats")
        if m.asset_key.to_user_string() == "ad_campaign_stats"
    ]
    assert meta["rows_inserted"].value == len(stats_of_truth(wb, "c1", [day])) > 0


def test_a_deferred_cycle_is_resumed_by_the_resume_sensor(wb, warehouse_conn, dagster_instance):
    """fullstats allows one request per 20 s: a sync that may not wait stores the first answer and
    the campaigns still to ask for; the resume sensor launches the job when WB allows the next."""
    from optima_pipelines.sensors.wb_sync import wb_sync_resume_sensor

    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    # WB's 20 s become 2 s here: longer than storing an answer takes, so the next request must wait.
    with WbApi(warehouse=warehouse, time_scale=10).client("c2", max_wait_seconds=0) as client:
        inp = SyncInput(
            connect=warehouse.connect, client=lambda: client, cabinet_id="c2", run_id=None, trigger="scheduled"
        )
        first = ads.sync_ads(inp)
    stats_run = first[1]
    assert stats_run.deferred_until is not None and stats_run.requests == 1
    state = get_state(warehouse_conn, "c2", ads.STATE_FEED)
    assert len(state.cursor["pending"]) == 1 and state.resume_at == stats_run.deferred_until

    wait_until(state.resume_at)
    with build_sensor_context(instance=dagster_instance, resources=RESOURCES) as context:
        result = wb_sync_resume_sensor(context)
    (request,) = result.run_requests
    assert request.job_name == "ads_sync"
    assert request.run_key == f"resume:ads:c2:{int(state.resume_at.timestamp())}"
    assert request.tags["optima/cabinet"] == "c2" and request.tags["optima/queue-class"] == "sync"
    run = defs.get_job_def("ads_sync").execute_in_process(
        run_config=request.run_config, instance=dagster_instance, tags=request.tags
    )
    assert run.success
    state = get_state(warehouse_conn, "c2", ads.STATE_FEED)
    assert state.resume_at is None and state.cursor["pending"] == []
    begin, end = ads.ads_window()
    days = [begin + timedelta(days=n) for n in range((end - begin).days + 1)]
    assert stats_in_warehouse(warehouse_conn, "c2") == stats_of_truth(wb, "c2", days)


def test_a_fault_storm_still_ends_with_wbs_statistics(wb, warehouse_conn, dagster_instance):
    storms = [
        wb.faults.set("GET advert/adv/v3/fullstats", error_rate=0.4, rate_429=0.2),
        wb.faults.set("GET advert/api/advert/v2/adverts", error_rate=0.5),
    ]
    for attempt in range(8):  # the storm lasts three runs at least (and through any resumes)
        assert run_job("ads_sync", dagster_instance, "c2").success
        if attempt >= 2 and get_state(warehouse_conn, "c2", ads.STATE_FEED).resume_at is None:
            break
    wb.faults.clear()
    assert all(s.fired > 0 for s in storms)
    begin, end = ads.ads_window()
    days = [begin + timedelta(days=n) for n in range((end - begin).days + 1)]
    assert stats_in_warehouse(warehouse_conn, "c2") == stats_of_truth(wb, "c2", days)
    assert campaigns_in_warehouse(warehouse_conn, "c2") == campaigns_of_truth(wb, "c2")
