"""A user's feed import recomputes the РНП of its own days in its run: the seller's days are in
rnp_daily when the import run ends, and the re-aggregation the sensor asks for afterwards finds
nothing left to compute."""

from __future__ import annotations

from datetime import timedelta

from dagster import DagsterEventType, SkipReason, build_sensor_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.mart.recompute import TABLES, recompute_partitions
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.requests import requests_sensor
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from tests.dagster.test_digitization import sim, wb  # noqa: F401  (fixtures: the WB simulator, served)


def import_request_run(instance, conn, cabinet: str, days: int, *, succeeds: bool = True):  # type: ignore[no-untyped-def]
    """A user's import request of the last ``days`` days, run as the daemon would run it."""
    date_from = today_moscow() - timedelta(days=days - 1)
    request_id = outbox.create_request(conn, "import-user-feeds", cabinet, {"dateFrom": date_from.isoformat()})
    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        (run_request,) = requests_sensor(context).run_requests  # type: ignore[union-attr]
    job = defs.get_job_def(run_request.job_name)
    run = job.execute_in_process(
        run_config=run_request.run_config, instance=instance, tags=run_request.tags, raise_on_error=False
    )
    assert run.success == succeeds
    period = [date_from + timedelta(days=n) for n in range(days)]
    return run, request_id, period


def day_totals(conn, cabinet: str, day) -> tuple[tuple, tuple]:  # type: ignore[no-untyped-def]
    """(rnp_daily, the feeds) of one day: orders count and sum, buyouts count (0 where there are none)."""
    mart = conn.execute(
        "SELECT sum(orders_count), sum(orders_sum), sum(buyouts_count) FROM rnp_daily WHERE cabinet_id = %s AND day = %s",
        (cabinet, day),
    ).fetchone()
    orders = conn.execute(
        "SELECT count(*), sum(price_with_disc) FROM wb_orders WHERE cabinet_id = %s AND day = %s", (cabinet, day)
    ).fetchone()
    (buyouts,) = conn.execute(
        "SELECT count(*) FILTER (WHERE NOT is_return) FROM wb_sales WHERE cabinet_id = %s AND day = %s", (cabinet, day)
    ).fetchone()
    return tuple(v or 0 for v in mart), (orders[0], orders[1] or 0, buyouts)


def test_an_import_run_writes_its_own_days_to_rnp_daily(wb, warehouse_conn, dagster_instance, database_url, optima_env):  # noqa: F811
    run, request_id, period = import_request_run(dagster_instance, warehouse_conn, "c2", 3)

    # The seller's days are in rnp_daily, with the orders WB sent, when the import run ends (just
    # after midnight in Moscow, today has no orders yet: the days together have).
    ordered = 0
    for day in period:
        mart, feeds = day_totals(warehouse_conn, "c2", day)
        ordered += feeds[0]
        assert mart[:2] == feeds[:2]
    assert ordered > 0
    # ... as materializations of the РНП assets of those partitions, in the import's own run, with
    # the mart's checks.
    materialized = {
        (e.asset_key.to_user_string(), e.partition)
        for e in run.all_events
        if e.event_type == DagsterEventType.ASSET_MATERIALIZATION and e.asset_key is not None
    }
    keys = {f"c2|{day.isoformat()}" for day in period}
    assert {("rnp_sales", k) for k in keys} | {("rnp_daily", k) for k in keys} <= materialized
    checks = [e for e in run.all_events if e.event_type == DagsterEventType.ASSET_CHECK_EVALUATION]
    assert {e.event_specific_data.partition for e in checks} >= keys  # type: ignore[union-attr]
    assert all(e.event_specific_data.passed for e in checks)  # type: ignore[union-attr]
    assert outbox.get_request(warehouse_conn, request_id).status == "succeeded"

    # Exactly what a recompute from scratch makes: recomputing every pair regardless of watermarks
    # changes no row of any table.
    warehouse = Warehouse(database_url=database_url, env=optima_env)
    for table in TABLES:
        stats = recompute_partitions(warehouse.connect, table, [("c2", d) for d in period], force=True)
        assert (table, stats.rows_changed, stats.rows_removed) == (table, 0, 0)

    # The import's run left nothing due: the re-aggregation sensor asks for no run.
    with build_sensor_context(instance=dagster_instance, resources=RESOURCES) as context:
        result = rnp_reaggregate_sensor(context)
    assert isinstance(result, SkipReason), result
    assert "no (cabinet, day) pair of the РНП is due" in str(result.skip_message)


def test_an_import_publishes_its_days_before_wbs_last_page(wb, warehouse_conn, dagster_instance):  # noqa: F811
    """WB's flag=0 load ends only on an empty page, and sales allow one request a minute: the import
    publishes its days' РНП once every feed has its first page, not a minute later. Here WB breaks
    that last sales answer: the import fails, naming it, and the days are in rnp_daily all the same,
    equal to what was stored."""
    wb.faults.set("*supplier/sales", malformed=True, after=1)
    run, _, period = import_request_run(dagster_instance, warehouse_conn, "c2", 3, succeeds=False)
    failure = next(e for e in run.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    assert "sales" in str(failure.event_specific_data.error)  # type: ignore[union-attr]

    buyouts = ordered = 0
    for day in period:
        mart, feeds = day_totals(warehouse_conn, "c2", day)
        assert mart == feeds
        ordered += feeds[0]
        buyouts += feeds[2]
    assert ordered > 0
    assert buyouts > 0  # the sales' first page is in the mart, not only the orders
