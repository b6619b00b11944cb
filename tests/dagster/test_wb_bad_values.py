"""Bad values from WB never reach the mart (docs/data.md, "Bad values from WB").

The simulator (WB over real HTTP) is told to serve hand-made rows (``faults.set(..., rewrite=...)``:
a NaN amount, a date in year 9999, an order whose lastChangeDate is in the future, a report line
without a product); the real sync jobs run against real PostgreSQL, and the tests read what was
stored, what ``wb_rejected_rows`` says, and the ``rnp_daily`` cells.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest

from optima_pipelines.sync.state import get_state, save_cursor
from optima_pipelines.timeutil import MOSCOW, now_moscow
from tests.rnp_feeds import rnp_rows, run_range
from tests.wb_syncs import TIME_SCALE, run_job, served, simulator
from wb_simulator import CabinetSpec, Simulator

ORDERS = "GET statistics/api/v1/supplier/orders"
REPORT = "POST finance/api/finance/v1/sales-reports/detailed"


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch) -> Iterator[Simulator]:
    sim = simulator(CabinetSpec(id="c1", products=6, orders_per_day=30, history_days=20, campaigns=3))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


@pytest.fixture
def behind(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch) -> Iterator[Simulator]:
    """A WB whose clock is at least 6 hours behind the real one, at noon (Moscow): its time can pass
    without reaching ours, and its next hours bring orders (a night's three hours may bring none:
    real 06:05 Moscow, WB at 00:05, three hours on, no new order, 2026-12-07)."""
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0) - timedelta(hours=6)
    now = now.replace(hour=12, minute=0, second=0) - timedelta(days=1 if now.hour < 12 else 0)
    spec = CabinetSpec(id="c1", products=6, orders_per_day=60, history_days=10, campaigns=0)
    sim = Simulator(seed=7, cabinets=[spec], time_scale=TIME_SCALE, now=now)
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def rewrite_rows(match: Callable[[dict[str, Any]], bool], change: dict[str, Any]) -> Callable[[Any], Any]:
    """WB's answer (a list of rows) with ``change`` applied to the rows ``match`` picks."""
    return lambda rows: [{**r, **change} if match(r) else r for r in rows]


def rejected(conn, feed: str) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT outcome, row_key, field, reason, raw, endpoint, times_seen FROM wb_rejected_rows "
        "WHERE cabinet_id = 'c1' AND feed = %s ORDER BY id",
        (feed,),
    )
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def stored_orders(conn) -> dict[str, tuple[Any, ...]]:
    rows = conn.execute("SELECT srid, price_with_disc, last_change_date FROM wb_orders WHERE cabinet_id = 'c1'")
    return {r[0]: r[1:] for r in rows.fetchall()}


def run_log(instance, result) -> str:
    return "\n".join(e.user_message for e in instance.all_logs(result.run_id))


@pytest.mark.drill
def test_nan_money_is_refused_per_row_and_the_mart_keeps_its_figures(
    wb, warehouse_conn, dagster_instance, database_url
):
    assert run_job("digitization_increment", dagster_instance, "c1").success
    yesterday = now_moscow().date() - timedelta(days=1)
    victim = next(o for o in wb.truth.orders("c1", yesterday) if o["priceWithDisc"])
    assert run_range(dagster_instance, f"c1|{yesterday}", f"c1|{yesterday}").success
    mart_before = rnp_rows(warehouse_conn, "rnp_daily", "c1", yesterday)
    stored_before = stored_orders(warehouse_conn)

    # WB now sends the order's money as "NaN" on every page that holds it.
    wb.faults.set(ORDERS, rewrite=rewrite_rows(lambda r: r["srid"] == victim["srid"], {"priceWithDisc": "NaN"}))
    result = run_job("digitization_backfill", dagster_instance, "c1", window_days=3)
    assert result.success
    assert stored_orders(warehouse_conn) == stored_before  # the order keeps the money it had
    (row,) = rejected(warehouse_conn, "wb_orders")
    assert row["outcome"] == "refused" and row["field"] == "priceWithDisc"
    assert row["reason"] == "priceWithDisc NaN is not a number"
    assert f"srid={victim['srid']}" in row["row_key"] and '"priceWithDisc":"NaN"' in row["raw"]
    assert row["endpoint"] == "GET statistics /api/v1/supplier/orders"
    assert "'rows_refused': 1" in run_log(dagster_instance, result)

    assert run_range(dagster_instance, f"c1|{yesterday}", f"c1|{yesterday}").success
    mart_after = rnp_rows(warehouse_conn, "rnp_daily", "c1", yesterday)
    assert mart_after == mart_before
    assert all(cell["orders_sum"].is_finite() for cell in mart_after.values())

    # WB sends it again on the next sync: the operator sees one row, seen twice.
    assert run_job("digitization_backfill", dagster_instance, "c1", window_days=3).success
    assert [r["times_seen"] for r in rejected(warehouse_conn, "wb_orders")] == [2]
    assert rejected_metric(database_url, "wb_orders", "refused") == 1


def rejected_metric(database_url: str, feed: str, outcome: str) -> float:
    """What /metrics says (optima_wb_rejected_rows) for the feed and outcome."""
    from optima_pipelines.operations.metrics import build_registry
    from optima_pipelines.settings import load_settings
    from tests.dagster.test_operations_metrics import sample, scrape

    settings = load_settings()
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    try:
        return sample(scrape(registry), "optima_wb_rejected_rows", feed=feed, outcome=outcome)
    finally:
        collector.close()


@pytest.mark.drill
def test_an_order_from_the_future_does_not_freeze_the_increment(behind, warehouse_conn, dagster_instance):
    wb = behind
    victim = wb.truth.orders("c1")[-1]["srid"]
    wb.faults.set(
        ORDERS, rewrite=rewrite_rows(lambda r: r["srid"] == victim, {"lastChangeDate": "2030-01-01T00:00:00"})
    )
    assert run_job("digitization_increment", dagster_instance, "c1").success

    # The order is stored as WB sent it, flagged, and the cursor stays in the present.
    assert stored_orders(warehouse_conn)[victim][1] == datetime(2030, 1, 1, tzinfo=MOSCOW)
    (row,) = rejected(warehouse_conn, "wb_orders")
    assert row["outcome"] == "flagged" and row["field"] == "lastChangeDate"
    assert row["reason"] == "lastChangeDate 2030-01-01T00:00:00+03:00 is in the future"
    cursor = datetime.fromisoformat(get_state(warehouse_conn, "c1", "orders").cursor["last_change_date"])
    assert cursor <= now_moscow()

    # Time passes at WB: the next increment brings the new orders.
    before = {o["srid"] for o in wb.truth.orders("c1")}
    wb.advance(timedelta(hours=3))
    assert {o["srid"] for o in wb.truth.orders("c1")} - before, "WB has new orders"
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert set(stored_orders(warehouse_conn)) == {o["srid"] for o in wb.truth.orders("c1")}

    # A cursor that froze in the future before this fix (saved as 2030) heals on the next increment.
    with warehouse_conn.transaction():
        frozen = {"last_change_date": "2030-01-01T00:00:00+03:00", "keys_at": [victim]}
        save_cursor(warehouse_conn, "c1", "orders", frozen, None)
    wb.advance(timedelta(hours=2))
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert set(stored_orders(warehouse_conn)) == {o["srid"] for o in wb.truth.orders("c1")}


def test_out_of_range_amounts_and_dates_are_refused_and_the_page_is_stored(wb, warehouse_conn, dagster_instance):
    orders = wb.truth.orders("c1")
    year_9999, infinite, huge, zoned = (o["srid"] for o in orders[3:7])

    def answer(rows: list[dict[str, Any]]) -> bytes:
        changed = []
        for r in rows:
            if r["srid"] == year_9999:
                r = {**r, "date": "9999-12-31T00:00:00"}
            elif r["srid"] == infinite:
                r = {**r, "spp": "Infinity"}
            elif r["srid"] == huge:
                r = {**r, "totalPrice": "__HUGE__"}
            elif r["srid"] == zoned:
                r = {**r, "lastChangeDate": "9999-12-31T23:00:00-05:00"}
            changed.append(r)
        return orjson.dumps(changed).replace(b'"__HUGE__"', b"1e400")  # JSON that Python cannot write

    wb.faults.set(ORDERS, rewrite=answer)
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert set(stored_orders(warehouse_conn)) == {o["srid"] for o in orders} - {year_9999, infinite, huge, zoned}
    reasons = {r["row_key"].split(",")[0]: r["reason"] for r in rejected(warehouse_conn, "wb_orders")}
    assert reasons == {
        f"srid={year_9999}": "date 9999-12-31T00:00:00+03:00 is out of range (2000-01-01 to 2100-12-31)",
        f"srid={infinite}": "spp Infinity is not a number",
        f"srid={huge}": "totalPrice 1E+400 is out of range (|x| ≥ 10^15)",
        f"srid={zoned}": "9999-12-31T23:00:00-05:00 is out of range",  # no Moscow time: refused as it decodes
    }


def test_a_report_line_without_a_product_is_stored_and_a_bad_one_refused_alone(wb, warehouse_conn, dagster_instance):
    assert run_job("digitization_increment", dagster_instance, "c1").success
    today = now_moscow().date()
    lines = wb.truth.report_lines("c1", today - timedelta(days=14), today - timedelta(days=1))
    productless, broken = lines[0]["rrdId"], lines[1]["rrdId"]
    changes = {productless: {"nmId": None}, broken: {"forPay": "NaN"}}
    wb.faults.set(REPORT, rewrite=lambda rows: [{**r, **changes.get(r["rrdId"], {})} for r in rows])
    assert run_job("finance_sync", dagster_instance, "c1").success

    stored = dict(
        warehouse_conn.execute("SELECT rrd_id, nm_id FROM wb_report_lines WHERE cabinet_id = 'c1'").fetchall()
    )
    assert set(stored) == {line["rrdId"] for line in lines} - {broken}
    assert stored[productless] is None
    (row,) = rejected(warehouse_conn, "wb_report_lines")
    assert row["reason"] == "forPay NaN is not a number" and f"rrdId={broken}" in row["row_key"]

    # The РНП counts the line without a product under nm_id 0, with the day's other such lines.
    (day,) = warehouse_conn.execute(
        "SELECT attributed_day FROM wb_report_lines WHERE cabinet_id = 'c1' AND rrd_id = %s", (productless,)
    ).fetchone()
    assert run_range(dagster_instance, f"c1|{day}", f"c1|{day}").success
    (without_product,) = warehouse_conn.execute(
        "SELECT count(*) FROM wb_report_lines WHERE cabinet_id = 'c1' AND attributed_day = %s "
        "AND coalesce(nm_id, 0) = 0",
        (day,),
    ).fetchone()
    assert rnp_rows(warehouse_conn, "rnp_finance", "c1", day)[0]["finance_lines"] == without_product


#: Each feed's sync, its WB method, how to spoil one row of WB's answer, and how to read what is stored.
FEEDS = {
    "stocks": (
        "inventory_sync",
        "POST analytics/api/analytics/v1/stocks-report/wb-warehouses",
        lambda body: {
            **body,
            "data": {"items": [{**body["data"]["items"][0], "quantity": 1.5}, *body["data"]["items"][1:]]},
        },
        "SELECT nm_id, chrt_id, warehouse_id, quantity FROM stocks WHERE cabinet_id = 'c1' ORDER BY 1, 2, 3",
    ),
    "prices": (
        "catalog_prices_sync",
        "GET prices/api/v2/list/goods/filter",
        lambda body: {
            **body,
            "data": {
                "listGoods": [
                    {
                        **body["data"]["listGoods"][0],
                        "sizes": [{**body["data"]["listGoods"][0]["sizes"][0], "price": "NaN"}],
                    },
                    *body["data"]["listGoods"][1:],
                ]
            },
        },
        "SELECT nm_id, price, discount FROM prices WHERE cabinet_id = 'c1' ORDER BY 1",
    ),
    "products": (
        "catalog_cards_sync",
        "POST content/content/v2/get/cards/list",
        lambda body: {**body, "cards": [{**body["cards"][0], "createdAt": "9999-12-31T00:00:00Z"}, *body["cards"][1:]]},
        "SELECT nm_id, title FROM products WHERE cabinet_id = 'c1' ORDER BY 1",
    ),
}


def _spoil_funnel(body: dict[str, Any]) -> dict[str, Any]:
    first, *rest = body["data"]["products"]
    selected = {**first["statistic"]["selected"], "orderSum": "NaN"}
    return {"data": {"products": [{**first, "statistic": {**first["statistic"], "selected": selected}}, *rest]}}


def _spoil_fullstats(body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    campaign = next(c for c in body if c.get("days"))
    day = campaign["days"][0]
    app = {**day["apps"][0], "nms": [{**day["apps"][0]["nms"][0], "sum": "Infinity"}, *day["apps"][0]["nms"][1:]]}
    spoilt = {**campaign, "days": [{**day, "apps": [app, *day["apps"][1:]]}, *campaign["days"][1:]]}
    return [spoilt if c is campaign else c for c in body]


FEEDS["rnp_funnel_stats"] = (
    "funnel_sync",
    "POST analytics/api/analytics/v3/sales-funnel/products",
    _spoil_funnel,
    "SELECT day, nm_id, order_sum FROM rnp_funnel_stats WHERE cabinet_id = 'c1' ORDER BY 1, 2",
)
FEEDS["ad_campaign_stats"] = (
    "ads_sync",
    "GET advert/adv/v3/fullstats",
    _spoil_fullstats,
    "SELECT advert_id, day, app_type, nm_id, sum FROM ad_campaign_stats WHERE cabinet_id = 'c1' ORDER BY 1, 2, 3, 4",
)


@pytest.mark.parametrize("feed", FEEDS)
def test_every_feed_refuses_a_bad_row_alone_and_keeps_what_it_had(feed, wb, warehouse_conn, dagster_instance):
    job, method, spoil, read = FEEDS[feed]
    assert run_job(job, dagster_instance, "c1").success
    before = warehouse_conn.execute(read).fetchall()
    assert len(before) > 1

    wb.faults.set(method, rewrite=spoil, times=1)
    result = run_job(job, dagster_instance, "c1")
    assert result.success
    # The spoilt row keeps what it had (a listing with a refused row removes nothing), the others load.
    assert warehouse_conn.execute(read).fetchall() == before
    (row,) = rejected(warehouse_conn, feed)
    assert row["outcome"] == "refused" and row["endpoint"] == method.replace("/", " /", 1)
    assert "'rows_refused': 1" in run_log(dagster_instance, result)
