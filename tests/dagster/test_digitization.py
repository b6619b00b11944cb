"""Digitization feeds end to end in process: the WB simulator over HTTP, real PostgreSQL, Dagster runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, build_sensor_context, materialize

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.partitions import CABINETS_NAME
from optima_pipelines.timeutil import MOSCOW, today_moscow
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from wb_simulator import CabinetSpec, Simulator, serve

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

TIME_SCALE = 600  # WB's 1-request-a-minute statistics limit becomes 0.1 s


@pytest.fixture
def sim() -> Simulator:
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
    return Simulator(
        seed=11,
        cabinets=[
            CabinetSpec(id="c1", products=30, orders_per_day=120, history_days=95),
            CabinetSpec(id="c2", products=20, orders_per_day=60, history_days=95),
        ],
        time_scale=TIME_SCALE,
        now=now,
    )


@pytest.fixture
def wb(sim: Simulator, optima_env, settings, warehouse_conn, dagster_instance, monkeypatch) -> Iterator[Simulator]:
    """The simulator served over HTTP, the deployment pointed at it, its cabinets registered."""
    with serve(sim) as base_url:
        monkeypatch.setenv("OPTIMA_WB_BASE_URL", base_url)
        monkeypatch.setenv("OPTIMA_WB_TIME_SCALE", str(TIME_SCALE))
        cipher = TokenCipher(load_key(settings))
        for cabinet in ("c1", "c2"):
            add_cabinet(warehouse_conn, cipher, cabinet, cabinet.upper(), sim.token(cabinet))
        dagster_instance.add_dynamic_partitions(CABINETS_NAME, ["c1", "c2"])
        yield sim


def warehouse_orders(conn, cabinet: str, day: date | None = None) -> dict[str, tuple]:
    sql = "SELECT srid, total_price, is_cancel FROM wb_orders WHERE cabinet_id = %s"
    params: list = [cabinet]
    if day is not None:
        sql += " AND day = %s"
        params.append(day)
    return {srid: (price, cancel) for srid, price, cancel in conn.execute(sql, params).fetchall()}


def truth_orders(sim: Simulator, cabinet: str, day: date | None = None) -> dict[str, tuple]:
    return {o["srid"]: (Decimal(str(o["totalPrice"])), o["isCancel"]) for o in sim.truth.orders(cabinet, day)}


def assert_feed_matches_truth(conn, sim: Simulator, cabinet: str) -> None:
    """Every order WB still serves is in the warehouse, identical; the warehouse may also keep
    orders that WB dropped after its 90 days (history we keep on purpose)."""
    truth = truth_orders(sim, cabinet)
    oldest = min(date.fromisoformat(o["date"][:10]) for o in sim.truth.orders(cabinet))
    ours = warehouse_orders(conn, cabinet)
    recent = {k: v for k, v in ours.items() if k in truth or warehouse_day(conn, cabinet, k) > oldest}
    assert recent == truth


def warehouse_day(conn, cabinet: str, srid: str) -> date:
    return conn.execute("SELECT day FROM wb_orders WHERE cabinet_id = %s AND srid = %s", (cabinet, srid)).fetchone()[0]


def materialized_partitions(instance, asset: str, after_id: int = 0) -> list[str]:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), after_storage_id=after_id or None), limit=10_000
    ).records
    return sorted(r.partition_key for r in records)


def latest_storage_id(instance) -> int:
    ids = [
        r.storage_id
        for asset in ("wb_orders", "wb_sales")
        for r in instance.fetch_materializations(AssetKey(asset), limit=1, ascending=False).records
    ]
    return max(ids, default=0)


def run_job(name: str, instance, cabinet: str, tags: dict | None = None, raise_on_error: bool = True, **config):
    job = defs.get_job_def(name)
    return job.execute_in_process(
        run_config=cabinet_run_config(name, cabinet, **config),
        instance=instance,
        tags=tags or {},
        raise_on_error=raise_on_error,
    )


def test_a_partition_reloads_exactly_its_day(wb, warehouse_conn, dagster_instance):
    day = today_moscow() - timedelta(days=3)
    from optima_pipelines.assets.digitization import wb_orders, wb_sales

    result = materialize(
        [wb_orders, wb_sales], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance
    )
    assert result.success
    assert warehouse_orders(warehouse_conn, "c1") == truth_orders(wb, "c1", day)  # that day and nothing else
    sales = warehouse_conn.execute("SELECT sale_id FROM wb_sales WHERE cabinet_id = 'c1'").fetchall()
    assert sorted(s for (s,) in sales) == sorted(s["saleID"] for s in wb.truth.sales("c1", day))
    meta = result.asset_materializations_for_node("wb_orders")[0].metadata
    assert meta["fetch"].value == "day"
    assert meta["rows_inserted"].value == len(truth_orders(wb, "c1", day)) > 0

    # Again: nothing changes.
    again = materialize([wb_orders], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance)
    meta = again.asset_materializations_for_node("wb_orders")[0].metadata
    assert (meta["rows_inserted"].value, meta["rows_updated"].value) == (0, 0)


def test_increment_loads_everything_then_sees_old_orders_change(wb, warehouse_conn, dagster_instance):
    first = run_job("digitization_increment", dagster_instance, "c1")
    assert first.success
    assert warehouse_orders(warehouse_conn, "c1") == truth_orders(wb, "c1")
    assert len(truth_orders(wb, "c1")) > 5_000

    # Nothing new: the next increment records no changed day.
    mark = latest_storage_id(dagster_instance)
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert materialized_partitions(dagster_instance, "wb_orders", mark) == []

    # An order of about a week ago (the oldest still undecided in the simulator: older ones are all
    # bought out or cancelled; how old that is depends on the hour the simulator starts) is
    # cancelled; the increment marks exactly that old day as changed.
    sold = {s["srid"] for s in wb.truth.sales("c1")}
    old_day, victim = next(
        (day, o)
        for day in (today_moscow() - timedelta(days=n) for n in range(8, 1, -1))
        for o in wb.truth.orders("c1", day)
        if not o["isCancel"] and o["srid"] not in sold
    )
    wb.cancel_order("c1", victim["srid"])
    mark = latest_storage_id(dagster_instance)
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert materialized_partitions(dagster_instance, "wb_orders", mark) == [f"c1|{old_day}"]
    assert warehouse_orders(warehouse_conn, "c1", old_day)[victim["srid"]][1] is True
    assert warehouse_orders(warehouse_conn, "c1") == truth_orders(wb, "c1")


def test_time_passing_brings_new_orders_sales_and_returns(wb, warehouse_conn, dagster_instance):
    assert run_job("digitization_increment", dagster_instance, "c2").success
    wb.advance(timedelta(hours=8))
    assert run_job("digitization_increment", dagster_instance, "c2").success
    assert_feed_matches_truth(warehouse_conn, wb, "c2")
    sale_ids = {s for (s,) in warehouse_conn.execute("SELECT sale_id FROM wb_sales WHERE cabinet_id = 'c2'").fetchall()}
    assert sale_ids >= {s["saleID"] for s in wb.truth.sales("c2")}
    assert any(s.startswith("R") for s in sale_ids), "returns are kept beside their sales"


def test_a_fault_storm_still_ends_with_identical_data(wb, warehouse_conn, dagster_instance):
    for path in ("GET statistics/api/v1/supplier/orders", "GET statistics/api/v1/supplier/sales"):
        wb.faults.set(path, error_rate=0.2, rate_429=0.1)
    assert run_job("digitization_increment", dagster_instance, "c2").success
    wb.faults.clear()
    assert warehouse_orders(warehouse_conn, "c2") == truth_orders(wb, "c2")


def test_an_increment_that_fails_after_a_stored_page_announces_its_days(wb, warehouse_conn, dagster_instance):
    """The page and its cursor stay committed and the next increment resumes after them, so the
    failed run must report the page's days, or their РНП is never recomputed (the disorder suite)."""
    wb.faults.set("GET statistics/api/v1/supplier/orders", truncate=True, after=1, times=1)
    assert not run_job("digitization_increment", dagster_instance, "c2", raise_on_error=False).success
    stored = {d for (d,) in warehouse_conn.execute("SELECT DISTINCT day FROM wb_orders WHERE cabinet_id = 'c2'")}
    assert stored  # page 1 was stored; the request after it got broken JSON
    assert materialized_partitions(dagster_instance, "wb_orders") == sorted(f"c2|{d}" for d in stored)


def test_a_bad_token_fails_the_run_clearly_without_leaking(wb, warehouse_conn, dagster_instance, settings):
    token = wb.token("c1")
    wb.revoke(token)
    from optima_pipelines.warehouse.cabinets import set_token

    set_token(warehouse_conn, TokenCipher(load_key(settings)), "c1", token)
    job = defs.get_job_def("digitization_increment")
    result = job.execute_in_process(
        run_config=cabinet_run_config("digitization_increment", "c1"),
        instance=dagster_instance,
        raise_on_error=False,
    )
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    message = failures[0].event_specific_data.error.message
    assert "c1" in message and ("401" in message or "token" in message.lower())
    logs = "\n".join(str(e) for e in dagster_instance.all_logs(result.run_id))
    assert token not in logs and token not in message
    assert warehouse_orders(warehouse_conn, "c1") == {}


def test_backfill_of_a_range_costs_one_wb_fetch(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.digitization import wb_orders

    days = [today_moscow() - timedelta(days=d) for d in (6, 5, 4)]
    results = [
        materialize(
            [wb_orders],
            partition_key=f"c1|{day}",
            resources=RESOURCES,
            instance=dagster_instance,
            tags={"dagster/backfill": "bf1"},
        )
        for day in days
    ]
    fetches = [
        next(m for m in r.asset_materializations_for_node("wb_orders") if m.partition == f"c1|{day}")
        .metadata["fetch"]
        .value
        for r, day in zip(results, days, strict=True)
    ]
    assert fetches == ["range", "memo", "memo"]
    for day in days:
        assert warehouse_orders(warehouse_conn, "c1", day) == truth_orders(wb, "c1", day)


def evaluate_requests_sensor(instance):
    from optima_pipelines.sensors.requests import requests_sensor

    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        return requests_sensor(context)


def test_user_import_request_goes_pending_running_succeeded(wb, warehouse_conn, dagster_instance):
    date_from = today_moscow() - timedelta(days=30)
    request_id = outbox.create_request(warehouse_conn, "import-user-feeds", "c2", {"dateFrom": date_from.isoformat()})
    result = evaluate_requests_sensor(dagster_instance)
    (run_request,) = result.run_requests
    assert run_request.run_key == f"request-{request_id}"
    assert int(run_request.tags["dagster/priority"]) > 0
    assert run_request.tags["optima/request-id"] == str(request_id)
    assert run_request.tags["optima/cabinet"] == "c2"

    job = defs.get_job_def(run_request.job_name)
    run = job.execute_in_process(run_config=run_request.run_config, instance=dagster_instance, tags=run_request.tags)
    assert run.success
    evaluate_requests_sensor(dagster_instance)
    request = outbox.get_request(warehouse_conn, request_id)
    assert (request.status, request.run_id) == ("succeeded", run.run_id)
    # The whole period [dateFrom, today] is recorded as changed, for both feeds.
    period = {f"c2|{date_from + timedelta(days=i)}" for i in range((today_moscow() - date_from).days + 1)}
    assert period <= set(materialized_partitions(dagster_instance, "wb_orders"))
    assert period <= set(materialized_partitions(dagster_instance, "wb_sales"))
    assert warehouse_orders(warehouse_conn, "c2") == {
        k: v for k, v in truth_orders(wb, "c2").items() if k in warehouse_orders(warehouse_conn, "c2")
    }
    for day in (date_from, today_moscow() - timedelta(days=1)):
        assert warehouse_orders(warehouse_conn, "c2", day) == truth_orders(wb, "c2", day)


@pytest.mark.parametrize(
    "cabinet, payload, reason",
    [
        ("ghost", {"dateFrom": "TODAY-5"}, "cabinet 'ghost' does not exist"),
        ("c1", {"dateFrom": "TODAY+3"}, "is in the future"),
        ("c1", {"dateFrom": "TODAY-120"}, "before WB's 90-day horizon"),
        ("c1", {"from": "2026-01-01"}, "malformed payload"),
        ("c1", ["not", "an", "object"], "malformed payload"),
        ("c1", {"dateFrom": "31.12.2026"}, "is not a date"),
    ],
)
def test_bad_import_requests_fail_with_a_reason_and_launch_nothing(
    wb, warehouse_conn, dagster_instance, cabinet, payload, reason
):
    if isinstance(payload, dict) and str(payload.get("dateFrom", "")).startswith("TODAY"):
        offset = int(payload["dateFrom"][5:])
        payload = {"dateFrom": (today_moscow() + timedelta(days=offset)).isoformat()}
    request_id = outbox.create_request(warehouse_conn, "import-user-feeds", cabinet, payload)
    result = evaluate_requests_sensor(dagster_instance)
    assert not getattr(result, "run_requests", None)
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "failed"
    assert reason in request.error
    assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0


def test_a_failed_sales_load_still_reports_the_days_of_the_orders_it_stored(wb, warehouse_conn, dagster_instance):
    """The orders committed (cursor included) before the sales feed failed: the next increment
    starts after them, so this run must report their days, or the РНП never recomputes them."""
    wb.faults.set("GET statistics/api/v1/supplier/sales", truncate=True)
    job = defs.get_job_def("digitization_increment")
    failed = job.execute_in_process(
        run_config=cabinet_run_config("digitization_increment", "c1"), instance=dagster_instance, raise_on_error=False
    )
    assert not failed.success
    assert warehouse_orders(warehouse_conn, "c1") == truth_orders(wb, "c1")
    order_days = {date.fromisoformat(o["date"][:10]) for o in wb.truth.orders("c1")}
    assert materialized_partitions(dagster_instance, "wb_orders") == sorted(f"c1|{d}" for d in order_days)
    assert materialized_partitions(dagster_instance, "wb_sales") == []


def test_an_increment_paused_by_wbs_one_sales_request_a_minute_ends_on_its_next_request(wb, warehouse_conn):
    """At WB's real pace (one sales request a minute), an increment reads its page, is paused before
    asking for WB's empty end, and goes on later from exactly where it stopped: WB sends the rows
    at the stop again, they are nothing new, and one request ends the load. (It went on from the
    cursor minus the overlap before, re-read the last hour and was paused again, every minute.)"""
    import os

    from optima_pipelines.resources.warehouse import Warehouse
    from optima_pipelines.resources.wb import WbApi
    from optima_pipelines.sync import digitization as dg
    from optima_pipelines.sync.runs import SyncInput
    from optima_pipelines.sync.state import get_state

    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    real_pace = WbApi(warehouse=warehouse, time_scale=1)  # the client keeps WB's real limits

    def load(date_from, seen):  # type: ignore[no-untyped-def]
        with real_pace.client("c1", max_wait_seconds=0) as client:
            inp = SyncInput(
                connect=warehouse.connect, client=lambda: client, cabinet_id="c1", run_id=None, trigger="scheduled"
            )
            return dg.load_feed(inp, dg.SALES, date_from, flag=0, cursor_feed="sales", seen=seen)

    first = load(*dg.increment_start(warehouse.connect, dg.SALES, "c1"))
    assert first.requests == 1 and first.rows_fetched > 0 and first.deferred_until is not None
    state = get_state(warehouse_conn, "c1", "sales")
    assert state.resume_at is not None and state.cursor["keys_at"]

    date_from, seen = dg.increment_start(warehouse.connect, dg.SALES, "c1")
    assert date_from == datetime.fromisoformat(state.cursor["last_change_date"]) and seen
    warehouse_conn.execute("DELETE FROM wb_rate_limits")  # the minute WB asked for has passed
    asked = len([c for c in wb.journal.calls("c1") if c.target.endswith("/sales")])
    rest = load(date_from, seen)
    assert rest.deferred_until is None, "paused again: the rows at the stop were taken for new ones"
    assert len([c for c in wb.journal.calls("c1") if c.target.endswith("/sales")]) == asked + 1
    assert rest.merge.inserted == rest.merge.updated == 0
    assert get_state(warehouse_conn, "c1", "sales").resume_at is None
