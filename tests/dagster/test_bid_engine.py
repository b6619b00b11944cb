"""The autobidder's bid engine against the WB simulator: a campaign converges to its target CPO, its bid
never leaves [min, max], every bid sent is in the audit trail, and the 60-s sensor launches runs only
for real work.

The simulator's ad statistics of a day follow the bid in effect at its end (views grow with the
bid, spend is views × bid), so each simulated day shows the engine the effect of its last change.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from dagster import DagsterRun, build_sensor_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncInput
from tests.sim_fixtures import NOW
from tests.wb_syncs import TIME_SCALE, half_up, served
from wb_simulator import CabinetSpec, Simulator
from wb_simulator.world import min_bid


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    # Many orders: a day's CPO of one product is stable to a few percent, so convergence shows.
    # A fixed day (the syncs here are given the simulator's day): the same figures whatever the date.
    spec = CabinetSpec(id="c1", products=4, orders_per_day=3000, history_days=8, campaigns=1)
    sim = Simulator(seed=5, cabinets=[spec], time_scale=TIME_SCALE, now=NOW)
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def sync_ads(sim) -> None:  # type: ignore[no-untyped-def]
    """The 5-minute ads sync, at the simulator's day."""
    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    with WbApi(warehouse=warehouse).client("c1") as client:
        inp = SyncInput(
            connect=warehouse.connect, client=lambda: client, cabinet_id="c1", run_id=None, trigger="scheduled"
        )
        ads.sync_ads(inp, state_feed=None, today=sim.now().date())


def tick(instance):  # type: ignore[no-untyped-def]
    from optima_pipelines.sensors.autobidder import autobidder_bid_engine_sensor

    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        result = autobidder_bid_engine_sensor(context)
    return list(getattr(result, "run_requests", None) or [])


def run(instance, request):  # type: ignore[no-untyped-def]
    result = defs.get_job_def(request.job_name).execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags
    )
    assert result.success
    return result


def day_cpo(conn, advert: int, nm: int) -> Decimal:
    spend, orders = conn.execute(
        "SELECT sum(sum), sum(orders) FROM ad_campaign_stats WHERE cabinet_id = 'c1' AND advert_id = %s AND nm_id = %s"
        " AND day = (SELECT max(day) FROM ad_campaign_stats WHERE cabinet_id = 'c1' AND advert_id = %s)",
        (advert, nm, advert),
    ).fetchone()
    return spend / orders


def last_days_cpo(conn, advert: int, nm: int, days: int) -> Decimal:
    spend, orders = conn.execute(
        "SELECT sum(sum), sum(orders) FROM ad_campaign_stats WHERE cabinet_id = 'c1' AND advert_id = %s AND nm_id = %s"
        " AND day > (SELECT max(day) FROM ad_campaign_stats WHERE cabinet_id = 'c1' AND advert_id = %s) - %s",
        (advert, nm, advert, days),
    ).fetchone()
    return spend / orders


def test_a_campaign_converges_to_its_target_cpo_within_its_bounds_and_every_bid_is_audited(
    wb, warehouse_conn, dagster_instance
):
    sync_ads(wb)
    assert tick(dagster_instance) == []  # no rule yet: no run
    (campaign,) = [c for c in wb.truth.campaigns("c1") if c["status"] == 9]
    advert = campaign["id"]
    nm, bid0 = warehouse_conn.execute(
        "SELECT p.nm_id, p.bid_search_kopecks FROM ad_campaign_products p JOIN ad_campaign_stats s USING"
        " (cabinet_id, advert_id, nm_id) WHERE p.advert_id = %s GROUP BY 1, 2 ORDER BY sum(s.orders) DESC LIMIT 1",
        (advert,),
    ).fetchone()
    cpo0 = day_cpo(warehouse_conn, advert, nm)
    target = (cpo0 * Decimal("1.8")).quantize(Decimal("0.01"))  # cheap orders: the seller wants more traffic
    low, high = 5_000, bid0 * 3  # the rule's minimum is under WB's: WB's wins
    wb_min = min_bid(campaign["settings"]["payment_type"], nm, "search")
    warehouse_conn.execute(
        "INSERT INTO autobidder_rules (cabinet_id, advert_id, nm_id, placement, strategy, target, min_bid_kopecks,"
        " max_bid_kopecks, max_step_percent, tolerance_percent, lookback_days, min_change_interval_minutes)"
        " VALUES ('c1', %s, %s, 'search', 'target_cpo', %s, %s, %s, 30, 8, 1, 0)",
        (advert, nm, target, low, high),
    )

    cpos, runs = [cpo0], 0
    for _ in range(7):  # a simulated week: each day the ads sync brings the day at the last bid
        for request in tick(dagster_instance):
            # One sweep over the cabinets with a bid to change: here c1 alone, under its lock (no gate tag).
            assert request.run_config["ops"]["autobidder_bid_engine_sweep_op"]["config"]["cabinet_ids"] == ["c1"]
            assert "optima/cabinet" not in request.tags and request.tags["optima/queue"] == "autobidder-bid-engine"
            run(dagster_instance, request)
            runs += 1
        assert tick(dagster_instance) == []  # decided on these statistics: nothing until new ones
        wb.advance(timedelta(days=1))
        sync_ads(wb)
        cpos.append(day_cpo(warehouse_conn, advert, nm))

    # A day's CPO also moves with demand (weekdays): over the last three days it is on target.
    assert abs(last_days_cpo(warehouse_conn, advert, nm, 3) - target) / target < Decimal("0.1"), (target, cpos)
    writes = [w for w in wb.writes if w.kind == "bids"]
    sent = [b["bid_kopecks"] for w in writes for a in w.payload["bids"] for b in a["nm_bids"]]
    assert len(sent) == runs >= 2  # one PATCH a run
    assert all(max(low, wb_min) <= b <= high for b in sent), sent
    assert sent[0] <= half_up(bid0 * Decimal("1.3"), 0)  # at most one step (30 %), rounded as the engine does
    (product,) = [p for p in wb.truth.campaigns("c1")[0]["nm_settings"] if p["nm_id"] == nm]
    assert product["bids_kopecks"]["search"] == sent[-1]

    audit = warehouse_conn.execute(
        "SELECT action, target, status, reason, request->>'bid_kopecks', response->>'bid_kopecks' FROM engine_actions"
        " WHERE cabinet_id = 'c1' AND engine = 'autobidder' ORDER BY id"
    ).fetchall()
    assert [int(a[4]) for a in audit] == sent and [int(a[5]) for a in audit] == sent
    assert {(a[0], a[1], a[2]) for a in audit} == {("set_bid", f"{advert}:{nm}:search", "ok")}
    assert "CPO" in audit[0][3] and "below the target" in audit[0][3]  # why, in the seller's words
    assert all(f"→ {b} kopecks" in a[3] for a, b in zip(audit, sent, strict=True))


def test_a_bid_is_never_sent_twice_for_the_same_decision(wb, warehouse_conn, dagster_instance):
    sync_ads(wb)
    (campaign,) = [c for c in wb.truth.campaigns("c1") if c["status"] == 9]
    product = campaign["nm_settings"][0]
    bid0 = product["bids_kopecks"]["search"]
    # A target far under the CPO: lower by the largest step, down to WB's minimum at most.
    warehouse_conn.execute(
        "INSERT INTO autobidder_rules (cabinet_id, advert_id, nm_id, placement, strategy, target, min_bid_kopecks,"
        " max_bid_kopecks, max_step_percent, min_change_interval_minutes)"
        " VALUES ('c1', %s, %s, 'search', 'target_cpo', 0.01, 100, %s, 10, 0)",
        (campaign["id"], product["nm_id"], bid0 * 2),
    )
    # Concurrency 1 per cabinet: while a run of the cabinet is in flight, the sensor launches none.
    in_flight = DagsterRun(job_name="autobidder_bid_engine", run_id=str(uuid.uuid4()), tags={"optima/cabinet": "c1"})
    dagster_instance.add_run(in_flight)
    assert tick(dagster_instance) == []
    dagster_instance.delete_run(in_flight.run_id)
    (request,) = tick(dagster_instance)
    run(dagster_instance, request)
    run(dagster_instance, request)  # a re-execution of the same run (a retry, a manual re-run)
    writes = [w for w in wb.writes if w.kind == "bids"]
    assert len(writes) == 1
    # A crash after WB took the bid but before the answer was recorded: the retry finds it on WB.
    warehouse_conn.execute("UPDATE engine_actions SET status = 'pending', response = NULL")
    warehouse_conn.execute("DELETE FROM autobidder_state")
    warehouse_conn.execute("UPDATE ad_campaign_products SET bid_search_kopecks = %s", (bid0,))
    run(dagster_instance, request)
    assert len([w for w in wb.writes if w.kind == "bids"]) == 1
    ((status, response),) = warehouse_conn.execute("SELECT status, response FROM engine_actions").fetchall()
    assert status == "ok" and response["already_on_wb"] is True


def test_a_bid_wb_refuses_is_audited_with_its_reason_and_does_not_hold_back_the_others(
    wb, warehouse_conn, dagster_instance
):
    sync_ads(wb)
    (campaign,) = [c for c in wb.truth.campaigns("c1") if c["status"] == 9]
    assert campaign["bid_type"] == "manual"
    good, bad = campaign["nm_settings"][:2]
    for product, placement in ((good, "search"), (bad, "combined")):  # combined: unified campaigns only
        warehouse_conn.execute(
            "INSERT INTO autobidder_rules (cabinet_id, advert_id, nm_id, placement, strategy, target,"
            " min_bid_kopecks, max_bid_kopecks, min_change_interval_minutes)"
            " VALUES ('c1', %s, %s, %s, 'target_cpo', 0.01, 100, 100000, 0)",
            (campaign["id"], product["nm_id"], placement),
        )
    (request,) = tick(dagster_instance)
    run(dagster_instance, request)  # the run succeeds: the good bid is set
    (product,) = [p for p in wb.truth.campaigns("c1")[0]["nm_settings"] if p["nm_id"] == good["nm_id"]]
    assert product["bids_kopecks"]["search"] < good["bids_kopecks"]["search"]
    audit = dict(
        warehouse_conn.execute(
            "SELECT target, status || ': ' || coalesce(response->>'error', '') FROM engine_actions"
        ).fetchall()
    )
    assert audit[f"{campaign['id']}:{good['nm_id']}:search"] == "ok: "
    refused = audit[f"{campaign['id']}:{bad['nm_id']}:combined"]
    assert refused.startswith("failed: ") and "combined" in refused  # WB's reason, for the seller
    (error,) = warehouse_conn.execute(
        "SELECT s.last_error FROM autobidder_state s JOIN autobidder_rules r ON r.id = s.rule_id"
        " WHERE r.placement = 'combined'"
    ).fetchone()
    assert "combined" in error
    assert tick(dagster_instance) == []  # not asked again every minute: it waits for new statistics
