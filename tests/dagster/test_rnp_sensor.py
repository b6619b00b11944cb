"""The re-aggregation sensor on a real instance: feeds written, exactly the due partitions out."""

from __future__ import annotations

import json

import pytest
from dagster import AssetKey, DagsterEventType, SensorResult, SkipReason, build_sensor_context
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.operations.metrics import build_registry
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor
from tests.rnp_feeds import (
    TODAY,
    add_ad_stat,
    add_cabinets,
    add_funnel,
    add_order,
    add_report_line,
    add_sale,
    add_stock,
    days_ago,
    execute_request,
    last_storage_id,
    materialized_partitions,
    report_feed_event,
    rnp_job,
    rnp_rows,
)


def scrape(database_url: str, settings) -> dict[tuple[str, frozenset], float]:
    """What /metrics exports now, sample by sample."""
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    try:
        text = generate_latest(registry).decode()
    finally:
        collector.close()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def tick(instance, cursor: str | None = None) -> SensorResult | SkipReason:
    with build_sensor_context(instance=instance, cursor=cursor, resources=RESOURCES) as context:
        result = rnp_reaggregate_sensor(context)
    assert isinstance(result, SensorResult | SkipReason)
    return result


def planned(result: SensorResult) -> set[tuple[tuple[str, ...], str, str]]:
    """Each run request as (assets, first partition, last partition)."""
    out = set()
    for r in result.run_requests or []:
        assets = tuple(k.to_user_string() for k in r.asset_selection or [])
        if r.partition_key is not None:
            out.add((assets, str(r.partition_key), str(r.partition_key)))
        else:
            out.add(
                (assets, r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
            )
    return out


def test_what_the_feeds_wrote_is_requested_with_the_matching_rollups(dagster_instance, warehouse_conn):
    """Rows written to the feeds (here by plain SQL, as a person in psql would: the feeds' triggers
    count them) make their (cabinet, day) pairs due; one tick requests them, batched."""
    add_cabinets(dagster_instance, "c0", "c1", "c2")
    conn = warehouse_conn
    d0, d1, d3, d25 = TODAY, days_ago(1), days_ago(3), days_ago(25)
    for cabinet in ("c1", "c2"):
        add_order(conn, cabinet, f"{cabinet}-a", d1, 7, "100.00")
        add_order(conn, cabinet, f"{cabinet}-b", d0, 7, "200.00")
    add_order(conn, "c1", "c1-old", d25, 8, "300.00")
    add_sale(conn, "c1", "S1", "c1-x", d3, 7, "90.00")
    add_ad_stat(conn, "c1", 1, d0, 7, views=10, clicks=1, spend="5.00")
    # The finance report: a line of day -2 whose order is of day -25, where the РНП places it.
    add_report_line(conn, "c1", 1, days_ago(2), 8, srid="c1-old", for_pay="250.00")
    add_stock(conn, "c0", d0, 7, 1, 1, 4)

    result = tick(dagster_instance)
    assert isinstance(result, SensorResult)
    sales, ads = ("rnp_sales", "rnp_daily"), ("rnp_ads", "rnp_daily")
    assert planned(result) == {
        # c2's last two days and c0's today, widened into one rectangle with c1 between them in the
        # partition order (each pair's watermark skips what did not change)...
        (sales, f"c0|{d1}", f"c2|{d0}"),
        # ... and what c1's writes made due beyond that: its days span three weeks, planned exactly.
        (sales, f"c1|{d3}", f"c1|{d3}"),
        (ads, f"c1|{d0}", f"c1|{d0}"),
        (("rnp_sales", "rnp_finance", "rnp_daily"), f"c1|{d25}", f"c1|{d25}"),
    }
    for request in result.run_requests or []:
        assert request.tags["optima/queue"] == "re-aggregate"
        assert request.tags["dagster/priority"] == "-10"

    before = last_storage_id(dagster_instance)
    for request in result.run_requests or []:
        execute_request(dagster_instance, request)
    # c1's today is merged twice (after its sales and after its ads, in two runs): harmless, not extra days.
    assert set(materialized_partitions(dagster_instance, "rnp_daily", before)) == {
        f"c0|{d1}",
        f"c0|{d0}",
        f"c1|{d1}",
        f"c1|{d0}",
        f"c2|{d1}",
        f"c2|{d0}",
        f"c1|{d3}",
        f"c1|{d25}",
    }
    assert materialized_partitions(dagster_instance, "rnp_finance", before) == [f"c1|{d25}"]
    assert rnp_rows(conn, "rnp_daily", "c1", d25)[8]["payout"] == 250
    assert rnp_rows(conn, "rnp_daily", "c2", d0)[7]["orders_sum"] == 200
    assert rnp_rows(conn, "rnp_daily", "c0", d0)[7]["stock_qty"] == 4

    # Everything recomputed is up to date: the next tick asks for nothing.
    again = tick(dagster_instance, result.cursor)
    assert isinstance(again, SkipReason) and "no (cabinet, day) pair of the РНП is due" in str(again.skip_message)


def test_a_materialization_alone_asks_for_nothing_and_a_write_no_event_named_is_recomputed(
    dagster_instance, warehouse_conn
):
    """What is due is what the feeds' triggers counted, not what the feeds' materializations say: an
    event with no write behind it plans nothing, and a write no event named (a user's report file,
    a person in psql) is planned as any other."""
    add_cabinets(dagster_instance, "c1")
    report_feed_event(dagster_instance, "wb_sales", "c1", TODAY)
    assert isinstance(tick(dagster_instance), SkipReason)
    add_order(warehouse_conn, "c1", "o1", days_ago(4), 42, "100.00")
    result = tick(dagster_instance)
    assert isinstance(result, SensorResult)
    assert planned(result) == {(("rnp_sales", "rnp_daily"), f"c1|{days_ago(4)}", f"c1|{days_ago(4)}")}


def test_import_then_a_late_cancellation_recomputes_only_that_day(dagster_instance, warehouse_conn):
    add_cabinets(dagster_instance, "c1")
    for n in range(30):
        add_order(warehouse_conn, "c1", f"o{n}", days_ago(n), 42, "100.00")
    first = tick(dagster_instance)
    assert isinstance(first, SensorResult)
    # A 30-day user import: one run over the 30 partitions, not 30 (or 60) runs.
    assert planned(first) == {(("rnp_sales", "rnp_daily"), f"c1|{days_ago(29)}", f"c1|{TODAY}")}
    execute_request(dagster_instance, (first.run_requests or [])[0])
    assert len(materialized_partitions(dagster_instance, "rnp_daily")) == 30

    # An increment brings the cancellation of the order placed 20 days ago.
    add_order(warehouse_conn, "c1", "o20", days_ago(20), 42, "100.00", is_cancel=True)
    second = tick(dagster_instance, first.cursor)
    assert isinstance(second, SensorResult)
    assert planned(second) == {(("rnp_sales", "rnp_daily"), f"c1|{days_ago(20)}", f"c1|{days_ago(20)}")}
    before = last_storage_id(dagster_instance)
    execute_request(dagster_instance, (second.run_requests or [])[0])
    assert materialized_partitions(dagster_instance, "rnp_sales", before) == [f"c1|{days_ago(20)}"]
    assert materialized_partitions(dagster_instance, "rnp_daily", before) == [f"c1|{days_ago(20)}"]
    row = rnp_rows(warehouse_conn, "rnp_daily", "c1", days_ago(20))[42]
    assert (row["orders_count"], row["cancellations_count"], row["cancellations_sum"]) == (1, 1, 100)


def checks_of(run, partition: str) -> dict[str, tuple[bool, str]]:
    """check name → (passed, description) of the run's evaluations of one partition."""
    out = {}
    for event in run.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            if str(evaluation.partition) == partition:
                out[evaluation.check_name] = (evaluation.passed, str(evaluation.description))
    return out


def test_a_check_that_fails_as_stale_heals_with_the_next_re_aggregation(dagster_instance, warehouse_conn):
    add_cabinets(dagster_instance, "c1")
    old, d1 = days_ago(20), days_ago(1)
    add_order(warehouse_conn, "c1", "o-old", old, 42, "100.00")
    add_order(warehouse_conn, "c1", "o-new", d1, 42, "300.00")
    first = tick(dagster_instance)
    assert isinstance(first, SensorResult)
    for request in first.run_requests or []:
        execute_request(dagster_instance, request)
    # The order of 20 days ago moves to yesterday (WB re-dated it; no event names the day it left):
    # a recompute of yesterday alone would check 20 days ago as stale.
    warehouse_conn.execute("UPDATE wb_orders SET day = %s WHERE srid = 'o-old'", (d1,))
    second = tick(dagster_instance, first.cursor)
    assert isinstance(second, SensorResult)
    # The next plan holds both days: the watermarks counted the day it left as well as the day it reached.
    partitions = {p for request in second.run_requests or [] for p in (request.partition_key,) if p} | {
        request.tags.get("dagster/asset_partition_range_start") for request in second.run_requests or []
    }
    assert f"c1|{old}" in partitions, planned(second)
    evaluated = {}
    for request in second.run_requests or []:
        evaluated.update(checks_of(execute_request(dagster_instance, request), f"c1|{old}"))
    passed, text = evaluated["orders_match_wb_orders"]
    assert passed, text
    assert not rnp_rows(warehouse_conn, "rnp_daily", "c1", old)
    assert rnp_rows(warehouse_conn, "rnp_daily", "c1", d1)[42]["orders_count"] == 2


def test_a_new_cabinets_first_import_adds_its_partitions_and_fills_its_rnp(dagster_instance, warehouse_conn):
    add_order(warehouse_conn, "fresh", "f1", TODAY, 5, "10.00")
    result = tick(dagster_instance)
    assert isinstance(result, SensorResult)
    [add] = result.dynamic_partitions_requests or []
    assert list(add.partition_keys) == ["fresh"]
    add_cabinets(dagster_instance, "fresh")  # what the daemon does with that request
    execute_request(dagster_instance, (result.run_requests or [])[0])
    assert rnp_rows(warehouse_conn, "rnp_daily", "fresh", TODAY)[5]["orders_count"] == 1


def test_a_failed_read_skips_the_tick_and_loses_nothing(dagster_instance, warehouse_conn):
    add_cabinets(dagster_instance, "c1")
    add_order(warehouse_conn, "c1", "o1", TODAY, 42, "100.00")
    warehouse_conn.execute("ALTER TABLE rnp_watermarks RENAME TO rnp_watermarks_away")
    try:
        failed = tick(dagster_instance)
    finally:
        warehouse_conn.execute("ALTER TABLE rnp_watermarks_away RENAME TO rnp_watermarks")
    assert isinstance(failed, SkipReason)
    assert "could not read the watermarks" in str(failed.skip_message)
    retried = tick(dagster_instance)  # the pair is still due
    assert isinstance(retried, SensorResult)
    assert planned(retried) == {(("rnp_sales", "rnp_daily"), f"c1|{TODAY}", f"c1|{TODAY}")}


def test_a_bad_cursor_is_named(dagster_instance):
    result = tick(dagster_instance, "not a cursor")
    assert isinstance(result, SkipReason) and "clear it in the UI" in str(result.skip_message)


@pytest.mark.parametrize("feed", ["rnp_funnel_stats", "stocks"])
def test_funnel_and_stock_writes_rerun_only_the_merge(dagster_instance, warehouse_conn, feed):
    add_cabinets(dagster_instance, "c1")
    if feed == "stocks":
        add_stock(warehouse_conn, "c1", days_ago(1), 7, 1, 1, 4)
    else:
        add_funnel(warehouse_conn, "c1", days_ago(1), 7, opens=10, carts=2)
    result = tick(dagster_instance)
    assert isinstance(result, SensorResult)
    assert planned(result) == {(("rnp_daily",), f"c1|{days_ago(1)}", f"c1|{days_ago(1)}")}


def test_a_re_aggregation_through_the_sensor_shows_in_metrics_with_its_lag(
    dagster_instance, warehouse_conn, database_url, settings
):
    """The seed's optima_reaggregate_* figures come from real recomputes: a 30-day import's rows, the
    sensor's run, then a scrape of /metrics."""
    add_cabinets(dagster_instance, "c1")
    for n in range(30):
        add_order(warehouse_conn, "c1", f"o{n}", days_ago(n), 42, "100.00")
    result = tick(dagster_instance)
    assert isinstance(result, SensorResult)
    [request] = result.run_requests or []
    execute_request(dagster_instance, request)

    figures = scrape(database_url, settings)

    def figure(name: str, **labels: str) -> float | None:
        return figures.get((name, frozenset(labels.items())))

    for domain in ("rnp-sales", "rnp-daily"):
        assert figure("optima_reaggregate_requests_total", domain=domain, status="success") == 1, domain
        assert figure("optima_reaggregate_partitions_requested_total", domain=domain) == 30, domain
        assert figure("optima_reaggregate_partitions_recomputed_total", domain=domain) == 30, domain
        # Measured from when the longest-waiting pair became due to the recompute's end.
        assert figure("optima_reaggregate_lag_seconds_count", domain=domain) == 1, domain
        assert 0 < figure("optima_reaggregate_lag_seconds_sum", domain=domain) < 600, domain
    assert figure("optima_reaggregate_requests_total", domain="rnp-finance", status="success") is None


def test_a_recompute_the_database_refuses_fails_at_once_with_the_cause_and_is_counted(
    dagster_instance, warehouse_conn, database_url, settings
):
    """A permanent database error (here an integrity violation) is not retried three times: the run
    fails on its first attempt naming the SQLSTATE, and /metrics counts one failed re-aggregation."""
    add_cabinets(dagster_instance, "c1")
    add_order(warehouse_conn, "c1", "o1", TODAY, 42, "100.00")
    warehouse_conn.execute("ALTER TABLE rnp_sales ADD CONSTRAINT no_orders CHECK (orders_count = 0) NOT VALID")
    result = rnp_job().execute_in_process(
        instance=dagster_instance,
        partition_key=f"c1|{TODAY}",
        asset_selection=[AssetKey("rnp_sales")],
        tags={"optima/trigger": "manual"},
        raise_on_error=False,
    )
    assert not result.success
    assert not [e for e in result.all_events if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    [failure] = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "CheckViolation (SQLSTATE 23514)" in message and "no_orders" in message, message

    scraped = scrape(database_url, settings)
    key = ("optima_reaggregate_requests_total", frozenset({"domain": "rnp-sales", "status": "failure"}.items()))
    assert scraped.get(key) == 1


@pytest.mark.parametrize("status", ["QUEUED", "STARTED"])
def test_while_its_last_run_has_not_ended_what_is_due_waits_and_is_then_planned_together(
    dagster_instance, warehouse_conn, optima_env, status
):
    """Sweeps write many cabinets at once: rather than a run per plan while the sensor's last run
    waits or works, what became due waits and the tick after it ends plans one run over all of it.
    Runs the sensor did not launch (the nightly merge, a backfill) hold nothing."""
    import uuid

    from dagster import DagsterRun

    add_cabinets(dagster_instance, "c1", "c2")

    def run_of(trigger: str) -> str:
        run = DagsterRun(job_name="rnp_recompute", run_id=str(uuid.uuid4()), tags={"optima/trigger": trigger})
        dagster_instance.add_run(run)
        warehouse_conn.execute(
            f"UPDATE dagster_{optima_env}.runs SET status = %s WHERE run_id = %s", (status, run.run_id)
        )
        return run.run_id

    nightly = run_of("schedule")
    add_order(warehouse_conn, "c1", "o1", TODAY, 42, "100.00")
    first = tick(dagster_instance)
    assert isinstance(first, SensorResult) and planned(first) == {
        (("rnp_sales", "rnp_daily"), f"c1|{TODAY}", f"c1|{TODAY}")
    }
    mine = run_of("sensor")
    add_order(warehouse_conn, "c2", "o2", TODAY, 42, "100.00")
    add_ad_stat(warehouse_conn, "c1", 1, TODAY, 42, views=10)
    held = tick(dagster_instance, first.cursor)
    assert isinstance(held, SkipReason) and "not ended yet" in str(held.skip_message)
    for run_id in (mine, nightly):
        dagster_instance.delete_run(run_id)
    together = tick(dagster_instance, first.cursor)
    assert isinstance(together, SensorResult)
    assert planned(together) == {(("rnp_sales", "rnp_ads", "rnp_daily"), f"c1|{TODAY}", f"c2|{TODAY}")}


def test_the_sensor_plans_at_most_once_a_minute_and_what_came_meanwhile_goes_together(
    dagster_instance, warehouse_conn, monkeypatch
):
    """OPTIMA_REAGGREGATE_EVERY_SECONDS: a window's sweeps write their cabinets over a minute or more;
    what becomes due after a plan waits for the interval and is then planned together."""
    monkeypatch.setenv("OPTIMA_REAGGREGATE_EVERY_SECONDS", "60")
    add_cabinets(dagster_instance, "c1", "c2")
    add_order(warehouse_conn, "c1", "o1", TODAY, 42, "100.00")
    first = tick(dagster_instance)
    assert isinstance(first, SensorResult) and planned(first) == {
        (("rnp_sales", "rnp_daily"), f"c1|{TODAY}", f"c1|{TODAY}")
    }
    add_order(warehouse_conn, "c2", "o2", TODAY, 42, "100.00")
    add_ad_stat(warehouse_conn, "c1", 1, TODAY, 42, views=10)
    held = tick(dagster_instance, first.cursor)
    assert isinstance(held, SkipReason) and "wait" in str(held.skip_message)
    # A minute later (the cursor says when it planned): both writes in one plan, nothing lost.
    cursor = json.loads(first.cursor)
    cursor["planned_at"] -= 61
    later = tick(dagster_instance, json.dumps(cursor))
    assert isinstance(later, SensorResult)
    # One run over both cabinets (widened: each pair's watermark skips what did not change).
    assert planned(later) == {(("rnp_sales", "rnp_ads", "rnp_daily"), f"c1|{TODAY}", f"c2|{TODAY}")}
