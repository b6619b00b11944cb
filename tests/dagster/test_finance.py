"""The realization report against the WB simulator: money to the kopeck, re-runs, faults, resumes, affected days."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from datetime import date, timedelta
from decimal import Decimal

import pytest
from dagster import materialize

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import finance as fin
from optima_pipelines.sync.state import get_state
from optima_pipelines.timeutil import today_moscow
from tests.rnp_feeds import due_days
from tests.wb_syncs import latest_storage_id, materializations, money, run_job, served, simulator, wait_until
from wb_simulator import CabinetSpec

#: Money columns of wb_report_lines and the finance API's names for them.
MONEY = {
    "retail_amount": "retailAmount",
    "for_pay": "forPay",
    "delivery_service": "deliveryService",
    "ppvz_sales_commission": "ppvzSalesCommission",
    "acquiring_fee": "acquiringFee",
    "vw": "vw",
    "vw_nds": "vwNds",
    "penalty": "penalty",
    "paid_storage": "paidStorage",
    "paid_acceptance": "paidAcceptance",
    "deduction": "deduction",
}


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(
        CabinetSpec(id="c1", products=15, orders_per_day=60, history_days=40, campaigns=2),
        CabinetSpec(id="c2", products=10, orders_per_day=30, history_days=40, campaigns=1),
    )
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def warehouse_lines(conn, cabinet: str, first: date, last: date) -> dict[int, dict[str, Decimal]]:
    cols = ", ".join(MONEY)
    rows = conn.execute(
        f"SELECT rrd_id, {cols} FROM wb_report_lines WHERE cabinet_id = %s AND day BETWEEN %s AND %s",
        (cabinet, first, last),
    ).fetchall()
    return {r[0]: dict(zip(MONEY, r[1:], strict=True)) for r in rows}


def truth_lines(sim, cabinet: str, first: date, last: date) -> dict[int, dict[str, Decimal]]:
    return {
        line["rrdId"]: {col: money(line[name]) for col, name in MONEY.items()}
        for line in sim.truth.report_lines(cabinet, first, last)
    }


def day_sums(lines: dict[int, dict[str, Decimal]], days: dict[int, date]) -> dict[date, dict[str, Decimal]]:
    sums: dict[date, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for rrd, values in lines.items():
        for col, v in values.items():
            sums[days[rrd]][col] += v
    return {d: dict(v) for d, v in sums.items()}


def test_nightly_sync_equals_wb_to_the_kopeck_and_says_which_days_changed(wb, warehouse_conn, dagster_instance):
    # The orders first: a line's source order decides the day the РНП places it on.
    assert run_job("digitization_increment", dagster_instance, "c1").success
    first, last = fin.report_window()

    result = run_job("finance_sync", dagster_instance, "c1", tags={"optima/trigger": "schedule"})
    assert result.success

    truth = truth_lines(wb, "c1", first, last)
    ours = warehouse_lines(warehouse_conn, "c1", first, last)
    assert len(truth) > 1000
    assert ours == truth  # every line, every money field, to the kopeck (numeric, never float)
    raw = wb.truth.report_lines("c1", first, last)
    line_day = {line["rrdId"]: date.fromisoformat(line["rrDate"]) for line in raw}
    assert day_sums(ours, line_day) == day_sums(truth, line_day)

    # One materialization per line day, with its counts; the РНП finance of the days of the lines'
    # source orders (else their own days) is due.
    order_day = {o["srid"]: date.fromisoformat(o["date"][:10]) for o in wb.truth.orders("c1")}
    mats = materializations(dagster_instance, "wb_report_lines")
    per_day = Counter(line_day.values())
    assert set(mats) == {f"c1|{d}" for d in per_day}
    for day, count in per_day.items():
        meta = mats[f"c1|{day}"]
        assert (meta["rows_fetched"], meta["rows_inserted"], meta["rows_updated"]) == (count, count, 0)
        assert meta["trigger"] == "scheduled"
        placed = {order_day.get(line["srid"], day) for line in raw if line_day[line["rrdId"]] == day}
        assert len(placed) > 1  # sales of a day come from orders of earlier days
    placed = {order_day.get(line["srid"], line_day[line["rrdId"]]) for line in raw}
    assert due_days(warehouse_conn, "c1", "rnp_finance") == placed

    # Again: nothing changes, nothing is reported as changed.
    mark = latest_storage_id(dagster_instance)
    assert run_job("finance_sync", dagster_instance, "c1").success
    assert materializations(dagster_instance, "wb_report_lines", mark) == {}
    assert warehouse_lines(warehouse_conn, "c1", first, last) == truth
    assert get_state(warehouse_conn, "c1", fin.STATE_FEED).cursor["complete"] is True


def test_a_fault_storm_still_ends_with_wbs_lines(wb, warehouse_conn, dagster_instance):
    storm = wb.faults.set("POST finance/api/finance/v1/sales-reports/detailed", error_rate=0.4, rate_429=0.3)
    first, last = fin.report_window()
    for _ in range(6):  # a 429 may defer the sync; the resume sensor would run it again
        assert run_job("finance_sync", dagster_instance, "c2").success
        if get_state(warehouse_conn, "c2", fin.STATE_FEED).resume_at is None:
            break
    wb.faults.clear()
    assert storm.fired > 0
    assert warehouse_lines(warehouse_conn, "c2", first, last) == truth_lines(wb, "c2", first, last)


def test_a_partition_reloads_the_lines_of_its_day(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.finance import wb_report_lines

    day = today_moscow() - timedelta(days=5)
    result = materialize([wb_report_lines], partition_key=f"c1|{day}", resources=RESOURCES, instance=dagster_instance)
    assert result.success
    assert warehouse_lines(warehouse_conn, "c1", date.min, date.max) == truth_lines(wb, "c1", day, day)
    meta = result.asset_materializations_for_node("wb_report_lines")[0].metadata
    assert meta["rows_inserted"].value == meta["rows_in_day"].value == len(truth_lines(wb, "c1", day, day)) > 0
    assert meta["trigger"].value == "manual"


def test_a_deferred_load_resumes_after_its_last_stored_page(wb, warehouse_conn, optima_env):
    """WB allows one report request a minute: a client that may not wait stores a page, records
    when to come back, and the next run asks only for what comes after that page."""
    warehouse = Warehouse(database_url=__import__("os").environ["OPTIMA_DATABASE_URL"])
    # WB's minute becomes 2 s here: longer than storing a page takes, so the next request must wait.
    api = WbApi(warehouse=warehouse, time_scale=30)
    first, last = fin.report_window()
    truth = truth_lines(wb, "c1", first, last)
    runs = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with api.client("c1", max_wait_seconds=0) as client:
            run = fin.load_report(
                warehouse.connect,
                client,
                "c1",
                first,
                last,
                run_id=None,
                trigger="scheduled",
                state_feed=fin.STATE_FEED,
                limit=500,
            )
        runs.append(run)
        if run.deferred_until is None:
            break
        wait_until(run.deferred_until)  # what the resume sensor does
    assert len(runs) > 2 and all(r.deferred_until is not None for r in runs[:-1])
    assert runs[-1].deferred_until is None
    assert warehouse_lines(warehouse_conn, "c1", first, last) == truth
    # Each run asked for one page after the stored one: no line was fetched twice.
    assert sum(r.rows_fetched for r in runs) == len(truth)
    state = get_state(warehouse_conn, "c1", fin.STATE_FEED)
    assert state.resume_at is None and state.cursor["complete"] is True


def test_a_short_page_that_is_not_the_last_does_not_end_the_report(wb, warehouse_conn, optima_env):
    """WB's contract is "request the next page until 204": a page shorter than the limit is not the
    end. The 204 that ends the report is a WB request like the others, and the sync counts it."""
    warehouse = Warehouse(database_url=__import__("os").environ["OPTIMA_DATABASE_URL"])
    first, last = fin.report_window()
    truth = truth_lines(wb, "c1", first, last)
    wb.finance_page_cap = len(truth) // 3 + 1  # three pages, each shorter than the limit asked for
    assert wb.finance_page_cap < 5_000  # (the window's size varies with today's date)
    with WbApi(warehouse=warehouse).client("c1") as client:
        run = fin.load_report(warehouse.connect, client, "c1", first, last, run_id=None, trigger="manual", limit=5_000)
    assert warehouse_lines(warehouse_conn, "c1", first, last) == truth
    assert run.rows_fetched == len(truth)
    assert run.summary()["wb_requests"] == 4  # three pages and the 204


def test_a_failure_on_a_later_page_keeps_the_pages_before_it_and_the_cursor(wb, warehouse_conn, dagster_instance):
    first, last = fin.report_window()
    truth = truth_lines(wb, "c1", first, last)
    wb.finance_page_cap = len(truth) // 3 + 1
    wb.faults.set("POST finance/api/finance/v1/sales-reports/detailed", truncate=True, after=1, times=1)

    assert not run_job("finance_sync", dagster_instance, "c1").success  # page 2 is broken JSON
    stored = warehouse_lines(warehouse_conn, "c1", first, last)
    page_one = sorted(truth)[: wb.finance_page_cap]
    assert sorted(stored) == page_one  # page 1 committed on its own, with its resume point
    cursor = get_state(warehouse_conn, "c1", fin.STATE_FEED).cursor
    assert (cursor["after_rrd_id"], cursor["complete"]) == (page_one[-1], False)
    # The failed run still reports the days page 1 changed: the РНП re-aggregation must see them.
    page_one_days = {date.fromisoformat(line["rrDate"][:10]) for line in wb.truth.report_lines("c1", first, last)
                     if line["rrdId"] in set(page_one)}  # fmt: skip
    assert set(materializations(dagster_instance, "wb_report_lines")) == {f"c1|{d}" for d in page_one_days}

    result = run_job("finance_sync", dagster_instance, "c1")  # WB answers again: resume after page 1
    assert result.success
    assert warehouse_lines(warehouse_conn, "c1", first, last) == truth
    syncs = warehouse_conn.execute(
        "SELECT status, rows_fetched FROM ops_feed_syncs WHERE cabinet_id = 'c1' AND feed = %s ORDER BY id",
        (fin.FEED,),
    ).fetchall()
    assert syncs == [("failure", 0), ("success", len(truth) - len(page_one))]  # no line fetched twice
