"""Catalog against the WB simulator: cards, prices, the price history WB does not keep, and `catalog-sync` requests."""

from __future__ import annotations

import os
from decimal import Decimal

import pytest

from optima_pipelines.definitions import defs
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.wb import PriceUpdate
from tests.wb_syncs import (
    evaluate_requests_sensor,
    latest_storage_id,
    materializations,
    money,
    run_job,
    served,
    simulator,
)
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    # More cards than WB's page of 100: the listing follows WB's cursor.
    sim = simulator(CabinetSpec(id="c1", products=230, orders_per_day=20, history_days=10, campaigns=1))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def cards_in_warehouse(conn) -> dict[int, tuple]:
    rows = conn.execute("SELECT nm_id, vendor_code, brand, title, sizes FROM products WHERE cabinet_id = 'c1'")
    return {r[0]: (r[1], r[2], r[3], [s["chrtID"] for s in r[4]]) for r in rows.fetchall()}


def cards_of_truth(sim) -> dict[int, tuple]:
    return {
        c["nmID"]: (c["vendorCode"], c["brand"], c["title"], [s["chrtID"] for s in c["sizes"]])
        for c in sim.truth.cards("c1")
    }


def prices_in_warehouse(conn) -> dict[int, tuple]:
    rows = conn.execute("SELECT nm_id, price, discount, club_discount FROM prices WHERE cabinet_id = 'c1'")
    return {r[0]: tuple(r[1:]) for r in rows.fetchall()}


def prices_of_truth(sim) -> dict[int, tuple]:
    return {
        g["nmID"]: (money(g["sizes"][0]["price"]), g["discount"], g["clubDiscount"]) for g in sim.truth.prices("c1")
    }


def test_cards_and_prices_equal_wb_and_prices_keep_their_history(wb, warehouse_conn, dagster_instance):
    assert run_job("catalog_cards_sync", dagster_instance, "c1").success
    assert run_job("catalog_prices_sync", dagster_instance, "c1").success
    assert cards_in_warehouse(warehouse_conn) == cards_of_truth(wb)
    assert len(cards_of_truth(wb)) == 230
    assert prices_in_warehouse(warehouse_conn) == prices_of_truth(wb)
    history = warehouse_conn.execute("SELECT nm_id, price, discount, club_discount FROM price_history").fetchall()
    assert {r[0]: tuple(r[1:]) for r in history} == prices_of_truth(wb) and len(history) == 230
    assert materializations(dagster_instance, "products")["c1"]["rows_inserted"] == 230
    assert materializations(dagster_instance, "price_history")["c1"]["rows_inserted"] == 230

    # Nothing changed at WB: nothing changes here.
    mark = latest_storage_id(dagster_instance)
    assert run_job("catalog_prices_sync", dagster_instance, "c1").success
    assert run_job("catalog_cards_sync", dagster_instance, "c1").success
    assert materializations(dagster_instance, "prices", mark) == {}
    assert materializations(dagster_instance, "products", mark) == {}
    assert warehouse_conn.execute("SELECT count(*) FROM price_history").fetchone()[0] == 230

    # The seller changes a price at WB: the next sync has it, and the history keeps both.
    nm, (price, discount, _) = next(iter(prices_of_truth(wb).items()))
    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    with WbApi(warehouse=warehouse).client("c1") as client:
        assert client.wait_price_task(client.upload_prices([PriceUpdate(nm_id=nm, price=int(price) + 100)])).done
    assert run_job("catalog_prices_sync", dagster_instance, "c1").success
    assert prices_in_warehouse(warehouse_conn)[nm] == (price + 100, discount, prices_of_truth(wb)[nm][2])
    rows = warehouse_conn.execute(
        "SELECT price FROM price_history WHERE cabinet_id = 'c1' AND nm_id = %s ORDER BY valid_from", (nm,)
    ).fetchall()
    assert [r[0] for r in rows] == [price, price + Decimal(100)]
    assert materializations(dagster_instance, "prices", mark)["c1"]["rows_updated"] == 1


def test_a_catalog_sync_request_syncs_the_whole_cabinet(wb, warehouse_conn, dagster_instance):
    request_id = outbox.create_request(warehouse_conn, "catalog-sync", "c1", {})
    (run_request,) = evaluate_requests_sensor(dagster_instance).run_requests
    assert run_request.job_name == "catalog_full_sync" and int(run_request.tags["dagster/priority"]) > 0
    run = defs.get_job_def(run_request.job_name).execute_in_process(
        run_config=run_request.run_config, instance=dagster_instance, tags=run_request.tags
    )
    assert run.success
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "succeeded" and request.result["products"]["rows_inserted"] == 230
    assert cards_in_warehouse(warehouse_conn) == cards_of_truth(wb)
    assert prices_in_warehouse(warehouse_conn) == prices_of_truth(wb)
