"""The WbApi resource: a client per cabinet, the token read from the warehouse at run time, never shown."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date, datetime

import pytest
from dagster import EnvVar, MaterializeResult, asset, materialize

from optima_pipelines.errors import UnknownCabinet
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.warehouse.cabinets import add_cabinet
from wb_simulator import CabinetSpec, Simulator, serve

NOW = datetime(2026, 8, 20, 12, 0)
DAY = date(2026, 8, 18)


@pytest.fixture(scope="module")
def sim() -> Simulator:
    return Simulator(
        seed=5, cabinets=[CabinetSpec(id="shop-1", orders_per_day=200, history_days=10)], time_scale=600, now=NOW
    )


@pytest.fixture(scope="module")
def base_url(sim: Simulator) -> Iterator[str]:
    with serve(sim) as url:
        yield url


@asset
def day_orders(wb: WbApi) -> MaterializeResult:
    """Orders of one day, straight from WB (a test asset)."""
    with wb.client("shop-1") as client:
        rows = [r for page in client.iter_orders(DAY, flag=1) for r in page]
    return MaterializeResult(metadata={"rows": len(rows), "cancelled": sum(r.is_cancel for r in rows)})


def test_an_asset_talks_to_wb_with_the_cabinets_stored_token_and_never_shows_it(
    sim: Simulator, base_url: str, settings, warehouse_conn, dagster_instance
):
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key

    token = sim.token("shop-1")
    add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), "shop-1", "Shop 1", token)
    warehouse = Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL"))
    resources = {"warehouse": warehouse, "wb": WbApi(base_url=base_url, time_scale=600, warehouse=warehouse)}

    result = materialize([day_orders], resources=resources, instance=dagster_instance)

    assert result.success
    truth = sim.truth.orders("shop-1", DAY)
    metadata = result.asset_materializations_for_node("day_orders")[0].metadata
    assert metadata["rows"].value == len(truth) > 100
    assert metadata["cancelled"].value == sum(o["isCancel"] for o in truth)
    # The rate limiter kept its bucket in the warehouse, where the next run will find it.
    assert warehouse_conn.execute(
        "SELECT count(*) FROM wb_rate_limits WHERE cabinet_id = 'shop-1' AND limit_group = 'statistics.orders'"
    ).fetchone() == (1,)
    # Nothing Dagster stored about the run carries the token.
    run = dagster_instance.get_run_by_id(result.run_id)
    stored = [repr(run.run_config), repr(run.tags)] + [repr(e) for e in dagster_instance.all_logs(result.run_id)]
    assert not [s for s in stored if token in s]


def test_a_cabinet_that_does_not_exist_is_named(base_url: str, optima_env: str):
    resource = WbApi(base_url=base_url, warehouse=Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"]))
    with pytest.raises(UnknownCabinet, match="'nope' does not exist"):
        resource.client("nope")


def test_the_resource_reads_its_defaults_from_the_environment(monkeypatch, optima_env: str):
    monkeypatch.setenv("OPTIMA_WB_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("OPTIMA_WB_TIME_SCALE", "60")
    config = WbApi(warehouse=Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])).config()
    assert config.url("finance", "/ping") == "http://127.0.0.1:9/finance/ping"
    assert config.time_scale == 60 and config.max_wait_seconds == 5.0
    monkeypatch.delenv("OPTIMA_WB_BASE_URL")
    monkeypatch.delenv("OPTIMA_WB_TIME_SCALE")
    config = WbApi(warehouse=Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])).config()
    assert config.url("statistics", "/ping") == "https://statistics-api.wildberries.ru/ping"
    assert config.time_scale == 1


def test_a_token_lacking_a_category_fails_that_call_but_leaves_the_cabinet_active(
    sim: Simulator, base_url: str, settings, warehouse_conn, dagster_instance
):
    """WB's 401 "scope not allowed" is about one category, not the token: other syncs still work,
    so the cabinet is not set token_invalid (a revoked token would be, see the system test)."""
    from optima_pipelines.warehouse.cabinets import get_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key

    add_cabinet(
        warehouse_conn, TokenCipher(load_key(settings)), "shop-1", "Shop 1", sim.token("shop-1", categories=["advert"])
    )
    warehouse = Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL"))
    resources = {"warehouse": warehouse, "wb": WbApi(base_url=base_url, time_scale=600, warehouse=warehouse)}
    result = materialize([day_orders], resources=resources, instance=dagster_instance, raise_on_error=False)
    assert not result.success
    cabinet = get_cabinet(warehouse_conn, "shop-1")
    assert (cabinet.status, cabinet.token_rejected_at) == ("active", None)


@asset
def seen_as(warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """What pg_stat_activity shows for the run's own connections, the direct one and the WB resource's."""
    names = {}
    for name, resource in (("warehouse", warehouse), ("wb", wb.warehouse)):
        with resource.connect() as conn:
            row = conn.execute("SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
            names[name] = row[0] if row else None
    return MaterializeResult(metadata=names)


def test_a_runs_connections_show_its_job_in_pg_stat_activity(base_url: str, settings, dagster_instance):
    warehouse = Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL"))
    resources = {"warehouse": warehouse, "wb": WbApi(base_url=base_url, time_scale=600, warehouse=warehouse)}

    result = materialize([seen_as], resources=resources, instance=dagster_instance)

    assert result.success
    metadata = result.asset_materializations_for_node("seen_as")[0].metadata
    # materialize() runs the implicit asset job: an operator sees which job a backend serves.
    assert metadata["warehouse"].value == "optima_pipelines/__ephemeral_asset_job__"
    assert metadata["wb"].value == "optima_pipelines/__ephemeral_asset_job__"
