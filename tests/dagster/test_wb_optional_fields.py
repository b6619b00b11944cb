"""WB leaves out what its OpenAPI lets it leave out: the syncs load the rest; a row missing a key is refused alone.

The simulator (a stand-in for WB, served over real HTTP) renders its rows through
``wb_simulator.rows``; each test wraps a renderer so that WB's answer omits fields its spec marks
optional, then runs the real sync job against real PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from dagster import materialize

import wb_simulator.rows as sim_rows
from tests.rnp_feeds import rnp_rows, run_range
from tests.wb_syncs import run_job, served, simulator
from wb_simulator import CabinetSpec

#: The fields the statistics feeds cannot do without (Order.KEYS / Sale.KEYS, in WB's names).
ORDER_KEYS = ("srid", "date", "lastChangeDate", "nmId")
SALE_KEYS = ("saleID", "date", "lastChangeDate", "nmId")


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=8, orders_per_day=30, history_days=20, campaigns=0))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def wb_renders(monkeypatch: pytest.MonkeyPatch, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """WB's answers (and the simulator's truth) show ``change(row)`` for each row ``rows.<name>`` renders."""
    original = getattr(sim_rows, name)
    monkeypatch.setattr(sim_rows, name, lambda *args: change(original(*args)))


def run_log(instance, result) -> str:
    return "\n".join(e.user_message for e in instance.all_logs(result.run_id))


def test_orders_and_sales_with_only_their_keys_load_and_a_sale_without_id_is_skipped(
    wb, warehouse_conn, dagster_instance, monkeypatch
):
    stripped_nm = wb.truth.orders("c1")[0]["nmId"]
    nameless = next(s for s in wb.truth.sales("c1") if s["nmId"] != stripped_nm)

    def order(row: dict[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in ORDER_KEYS} if row["nmId"] == stripped_nm else row

    def sale(row: dict[str, Any]) -> dict[str, Any]:
        if row["saleID"] == nameless["saleID"]:
            return {**row, "saleID": ""}
        return {k: row[k] for k in SALE_KEYS} if row["nmId"] == stripped_nm else row

    wb_renders(monkeypatch, "order_row", order)
    wb_renders(monkeypatch, "sale_row", sale)
    result = run_job("digitization_increment", dagster_instance, "c1")
    assert result.success

    orders = wb.truth.orders("c1")
    stored = {
        r[0]: r[1:]
        for r in warehouse_conn.execute(
            "SELECT srid, nm_id, total_price, price_with_disc, spp, is_cancel FROM wb_orders WHERE cabinet_id = 'c1'"
        ).fetchall()
    }
    assert set(stored) == {o["srid"] for o in orders}
    bare = [o["srid"] for o in orders if o["nmId"] == stripped_nm]
    assert bare and all(stored[s] == (stripped_nm, None, None, None, False) for s in bare)

    sales = {r[0]: r[1] for r in warehouse_conn.execute("SELECT sale_id, srid FROM wb_sales WHERE cabinet_id = 'c1'")}
    assert set(sales) == {s["saleID"] for s in wb.truth.sales("c1")} - {""}
    assert all(sales[s["saleID"]] is None for s in wb.truth.sales("c1") if s["nmId"] == stripped_nm)
    assert "'rows_skipped': 1" in run_log(dagster_instance, result)
    assert nameless["srid"] in run_log(dagster_instance, result)  # the operator can find the row at WB

    # In the РНП a bare order counts, and adds nothing to the sums; the day's checks pass.
    day = next(date.fromisoformat(o["date"][:10]) for o in orders if o["nmId"] == stripped_nm)
    recompute = run_range(dagster_instance, f"c1|{day}", f"c1|{day}")
    assert recompute.success
    checks = [e.event_specific_data for e in recompute.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert checks and all(c.passed for c in checks), [c.description for c in checks]
    figures = rnp_rows(warehouse_conn, "rnp_daily", "c1", day)[stripped_nm]
    bare_of_day = [o for o in orders if o["nmId"] == stripped_nm and o["date"].startswith(day.isoformat())]
    assert figures["orders_count"] == len(bare_of_day) and figures["orders_sum"] == 0
    assert figures["avg_spp_percent"] is None


def test_a_product_without_sizes_has_no_price_and_one_without_discount_has_none(
    wb, warehouse_conn, dagster_instance, monkeypatch
):
    assert run_job("catalog_prices_sync", dagster_instance, "c1").success
    goods = wb.truth.prices("c1")
    unsized, undiscounted = goods[0]["nmID"], goods[1]["nmID"]

    def price(row: dict[str, Any]) -> dict[str, Any]:
        if row["nmID"] == unsized:
            return {**row, "sizes": []}
        return {k: v for k, v in row.items() if k != "discount"} if row["nmID"] == undiscounted else row

    wb_renders(monkeypatch, "goods", price)
    assert run_job("catalog_prices_sync", dagster_instance, "c1").success
    prices = dict(warehouse_conn.execute("SELECT nm_id, discount FROM prices WHERE cabinet_id = 'c1'").fetchall())
    assert set(prices) == {g["nmID"] for g in goods} - {unsized}
    assert prices[undiscounted] == 0
    # The price it had stays in its history.
    history = warehouse_conn.execute("SELECT count(*) FROM price_history WHERE nm_id = %s", (unsized,)).fetchone()
    assert history[0] == 1


def test_a_row_missing_its_key_is_refused_alone_naming_the_endpoint_and_the_field(
    wb, warehouse_conn, dagster_instance, monkeypatch
):
    orders = wb.truth.orders("c1")
    broken = orders[3]["srid"]
    wb_renders(monkeypatch, "order_row", lambda row: {k: v for k, v in row.items() if k != "srid" or v != broken})
    job_result = run_job("digitization_increment", dagster_instance, "c1")
    assert job_result.success
    stored = {r[0] for r in warehouse_conn.execute("SELECT srid FROM wb_orders").fetchall()}
    assert stored == {o["srid"] for o in orders} - {broken}  # the page's other rows are stored
    refused = warehouse_conn.execute(
        "SELECT endpoint, field, reason, raw FROM wb_rejected_rows WHERE feed = 'wb_orders' AND outcome = 'refused'"
    ).fetchall()
    assert [r[:3] for r in refused] == [
        ("GET statistics /api/v1/supplier/orders", "srid", "required field 'srid' is missing")
    ]
    assert f'"nmId":{orders[3]["nmId"]}' in refused[0][3]  # the row as WB sent it: the operator can find it
    assert "'rows_refused': 1" in run_log(dagster_instance, job_result)


def test_a_card_and_a_news_item_with_only_their_keys_load(wb, warehouse_conn, dagster_instance, monkeypatch):
    from optima_pipelines.assets.news import kb_articles
    from optima_pipelines.definitions import RESOURCES

    # The simulator pages cards by updatedAt: the bare card keeps it (the others' optional fields go).
    bare_nm = wb.truth.cards("c1")[0]["nmID"]
    wb_renders(
        monkeypatch, "card", lambda row: {k: row[k] for k in ("nmID", "updatedAt")} if row["nmID"] == bare_nm else row
    )
    assert run_job("catalog_cards_sync", dagster_instance, "c1").success
    cards = {
        r[0]: r[1:] for r in warehouse_conn.execute("SELECT nm_id, imt_id, vendor_code, title, sizes FROM products")
    }
    assert set(cards) == {c["nmID"] for c in wb.truth.cards("c1")}
    assert cards[bare_nm] == (None, None, None, [])

    bare_id = wb.truth.news()[0]["id"]
    item = next(n for n in wb.news.items if n["id"] == bare_id)
    for field in ("header", "content", "date", "types"):
        del item[field]
    assert materialize([kb_articles], resources=RESOURCES, instance=dagster_instance).success
    news = {r[0]: r[1:] for r in warehouse_conn.execute("SELECT news_id, header, published_at, types FROM kb_articles")}
    assert set(news) == {n["id"] for n in wb.truth.news()}
    assert news[bare_id] == ("", None, [])
