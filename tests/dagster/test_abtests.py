"""A/B test metrics: after the ads and funnel syncs, each started variant of a running test gets WB's figures
for its own period, recomputed in place by the `25 */3 * * *` schedule's run."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from dagster import build_schedule_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.timeutil import MOSCOW
from tests.wb_syncs import half_up, money, run_job, served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=6, orders_per_day=80, history_days=20, campaigns=3))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def evaluate(instance):  # type: ignore[no-untyped-def]
    from optima_pipelines.sensors.abtests import ab_test_metrics_schedule

    tick = datetime.now(MOSCOW).replace(minute=25, second=0, microsecond=0)
    with build_schedule_context(instance=instance, scheduled_execution_time=tick, resources=RESOURCES) as context:
        return ab_test_metrics_schedule.evaluate_tick(context)


def truth(sim, nm: int, days) -> dict[str, Decimal]:  # type: ignore[no-untyped-def]
    out = dict.fromkeys(("views", "clicks", "ad_spend", "ad_orders", "card_opens", "add_to_cart", "orders"), Decimal(0))
    for day in days:
        for row in sim.truth.ad_stats("c1", day).values():
            for app in row["apps"]:
                for item in app["nms"]:
                    if item["nmId"] == nm:
                        out["views"] += item["views"]
                        out["clicks"] += item["clicks"]
                        out["ad_spend"] += money(item["sum"])
                        out["ad_orders"] += item["orders"]
        funnel = sim.truth.funnel("c1", day).get(nm)
        if funnel:
            out["card_opens"] += funnel["openCount"]
            out["add_to_cart"] += funnel["cartCount"]
            out["orders"] += funnel["orderCount"]
    return out


def test_running_tests_get_each_variants_metrics_from_the_synced_data(wb, warehouse_conn, dagster_instance):
    assert evaluate(dagster_instance).skip_message.endswith("no running A/B test")
    assert run_job("ads_sync", dagster_instance, "c1", window_days=9).success
    assert run_job("funnel_sync", dagster_instance, "c1", window_days=9).success
    (campaign, *_) = [c for c in wb.truth.campaigns("c1") if c["status"] == 9]
    nm = campaign["nm_settings"][0]["nm_id"]
    today = wb.now().date()
    a_days = [today - timedelta(days=n) for n in (7, 6, 5)]
    b_days = [today - timedelta(days=n) for n in (4, 3, 2, 1)]
    (test_id,) = warehouse_conn.execute(
        "INSERT INTO ab_tests (cabinet_id, nm_id, name) VALUES ('c1', %s, 'main photo') RETURNING id", (nm,)
    ).fetchone()
    variants = {}
    for name, first, last in (
        ("A", a_days[0], a_days[-1]),
        ("B", b_days[0], b_days[-1]),
        ("C", today + timedelta(days=1), today + timedelta(days=5)),  # not started: no result yet
    ):
        (variants[name],) = warehouse_conn.execute(
            "INSERT INTO ab_test_variants (test_id, name, date_from, date_to) VALUES (%s, %s, %s, %s) RETURNING id",
            (test_id, name, first, last),
        ).fetchone()

    (request,) = evaluate(dagster_instance).run_requests
    assert request.tags["optima/queue"] == "ab-test-metrics" and "optima/cabinet" not in request.tags  # no WB call
    for _ in range(2):  # a re-run recomputes in place
        result = defs.get_job_def("ab_test_metrics").execute_in_process(instance=dagster_instance, tags=request.tags)
        assert result.success

    rows = warehouse_conn.execute(
        "SELECT variant_id, days, views, clicks, ad_spend, ad_orders, card_opens, add_to_cart, orders, ctr, cpc,"
        " add_to_cart_conversion, cart_to_order_conversion, orders_per_day FROM ab_test_results WHERE test_id = %s",
        (test_id,),
    ).fetchall()
    got = {r[0]: r for r in rows}
    assert set(got) == {variants["A"], variants["B"]}
    for name, days in (("A", a_days), ("B", b_days)):
        row, want = got[variants[name]], truth(wb, nm, days)
        assert row[1] == len(days)
        assert dict(zip(want, row[2:9], strict=True)) == want, name
        assert want["views"] > 0 and want["card_opens"] > 0, "the product had ads and card opens in the period"
        views, clicks, spend, _, opens, carts, orders = row[2:9]
        # PostgreSQL's round() goes half away from zero (orders / 4 days can end in 5 at the third decimal).
        assert row[9] == half_up(Decimal(clicks * 100) / views) and row[10] == half_up(spend / clicks)
        assert row[11] == half_up(Decimal(carts * 100) / opens) and row[12] == half_up(Decimal(orders * 100) / carts)
        assert row[13] == half_up(Decimal(orders) / len(days))
