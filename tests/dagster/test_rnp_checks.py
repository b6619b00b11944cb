"""The rnp_daily asset checks: per partition, against the feeds; a failure names the metric and both numbers."""

from __future__ import annotations

from datetime import UTC, datetime

from dagster import AssetCheckEvaluation, AssetCheckSeverity

from tests.rnp_feeds import TODAY, add_ad_stat, add_cabinets, add_order, add_report_line, days_ago, run_range

Y = days_ago(1)


def evaluations(result) -> dict[tuple[str, str], AssetCheckEvaluation]:
    out = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            out[(evaluation.check_name, str(evaluation.partition))] = evaluation
    return out


def confirm_feeds(conn, cabinet: str) -> None:
    """The cabinet's first loads of the checked feeds are done (what every sync records)."""
    from optima_pipelines.mart.checks import CHECK_SOURCES
    from optima_pipelines.operations.records import record_feed_sync
    from optima_pipelines.orchestration.queues import ASSET_QUEUES

    now = datetime.now(UTC)
    for feed in CHECK_SOURCES:
        record_feed_sync(
            conn,
            queue=ASSET_QUEUES[feed],
            feed=feed,
            cabinet_id=cabinet,
            run_id="r",
            trigger="scheduled",
            started_at=now,
            finished_at=now,
        )


def load(dagster_instance, conn, *, first_load_done: bool = True):
    add_cabinets(dagster_instance, "c1")
    if first_load_done:
        confirm_feeds(conn, "c1")
    for day, tag in ((Y, "y"), (TODAY, "t")):
        add_order(conn, "c1", f"{tag}1", day, 7, "200.00")
        add_order(conn, "c1", f"{tag}2", day, 8, "99.99", is_cancel=True)
        add_ad_stat(conn, "c1", 1, day, 7, views=100, clicks=3, spend="12.34")
    add_report_line(conn, "c1", 1, TODAY, 7, srid="y1", for_pay="180.00")
    add_report_line(conn, "c1", 2, TODAY, 8, srid="y2", for_pay="50.00", doc_type_name="Возврат")


def test_checks_pass_on_every_partition_of_a_good_run(dagster_instance, warehouse_conn):
    load(dagster_instance, warehouse_conn)
    result = run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}")
    found = evaluations(result)
    names = ("orders_match_wb_orders", "ad_spend_matches_ad_campaign_stats", "payout_matches_finance_lines")
    assert set(found) == {(n, f"c1|{d}") for n in names for d in (Y, TODAY)}
    assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items()}
    assert found[("payout_matches_finance_lines", f"c1|{Y}")].description == "payout 130.00 match wb_report_lines"


def test_tampered_rows_fail_naming_the_metric_and_both_numbers(dagster_instance, warehouse_conn):
    load(dagster_instance, warehouse_conn)
    run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}")
    warehouse_conn.execute(
        "UPDATE rnp_daily SET orders_sum = orders_sum + 0.01 WHERE cabinet_id = 'c1' AND day = %s AND nm_id = 7",
        (TODAY,),
    )
    warehouse_conn.execute("UPDATE rnp_daily SET ad_spend = 0, payout = payout - 50 WHERE day = %s AND nm_id = 7", (Y,))
    # The checks alone, as an operator launches them to audit a range.
    found = evaluations(run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}", job="rnp_daily_check"))

    orders_today = found[("orders_match_wb_orders", f"c1|{TODAY}")]
    assert not orders_today.passed and orders_today.severity == AssetCheckSeverity.ERROR
    assert orders_today.description == (
        f"orders_sum: rnp_daily has 300.00, wb_orders has 299.99 (cabinet c1, day {TODAY.isoformat()})"
    )
    assert orders_today.metadata["orders_sum_rnp_daily"].value == "300.00"
    assert orders_today.metadata["orders_sum_wb_orders"].value == "299.99"
    spend = found[("ad_spend_matches_ad_campaign_stats", f"c1|{Y}")]
    assert not spend.passed and "ad_spend: rnp_daily has 0, ad_campaign_stats has 12.34" in str(spend.description)
    payout = found[("payout_matches_finance_lines", f"c1|{Y}")]
    assert not payout.passed and "payout: rnp_daily has 80.00, wb_report_lines has 130.00" in str(payout.description)
    # Untouched partitions and metrics still pass.
    assert found[("orders_match_wb_orders", f"c1|{Y}")].passed
    assert found[("ad_spend_matches_ad_campaign_stats", f"c1|{TODAY}")].passed


def test_a_feed_written_after_the_recompute_warns_that_the_mart_is_behind_not_wrong(dagster_instance, warehouse_conn):
    """A sweep that commits an order between the mart's write and its check (or before an audit):
    the check still fails, naming both numbers, but as a warning that says a re-aggregation is due;
    the re-aggregation then makes it pass."""
    load(dagster_instance, warehouse_conn)
    run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}")
    add_order(warehouse_conn, "c1", "t3", TODAY, 7, "10.00")
    found = evaluations(run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}", job="rnp_daily_check"))

    behind = found[("orders_match_wb_orders", f"c1|{TODAY}")]
    assert not behind.passed and behind.severity == AssetCheckSeverity.WARN
    assert behind.description == (
        f"orders_count: rnp_daily has 2, wb_orders has 3; orders_sum: rnp_daily has 299.99, wb_orders has 309.99 "
        f"(cabinet c1, day {TODAY.isoformat()}); the feeds changed after its last recompute: a re-aggregation is due"
    )
    assert behind.metadata["stale"].value is True
    # Yesterday's feeds did not change: its checks pass and are not stale.
    assert found[("orders_match_wb_orders", f"c1|{Y}")].passed
    assert found[("orders_match_wb_orders", f"c1|{Y}")].metadata["stale"].value is False

    found = evaluations(run_range(dagster_instance, f"c1|{TODAY}", f"c1|{TODAY}"))
    assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items()}


def test_a_merge_alone_over_a_rollup_behind_its_feed_warns_not_fails(dagster_instance, warehouse_conn):
    """A run that merges rnp_daily alone (the funnel changed) while an order waits for rnp_sales'
    recompute: rnp_daily is fresh by its own watermark but behind wb_orders; the check warns."""
    load(dagster_instance, warehouse_conn)
    run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}")
    add_order(warehouse_conn, "c1", "t3", TODAY, 7, "10.00")
    found = evaluations(run_range(dagster_instance, f"c1|{TODAY}", f"c1|{TODAY}", assets=["rnp_daily"]))

    behind = found[("orders_match_wb_orders", f"c1|{TODAY}")]
    assert not behind.passed and behind.severity == AssetCheckSeverity.WARN, behind.description
    assert "a re-aggregation is due" in str(behind.description)


def test_while_a_cabinets_first_load_is_not_done_a_mismatch_is_a_warning_not_an_error(dagster_instance, warehouse_conn):
    """A fresh deployment: the mart is recomputed while the feeds' first load still lands its pages.
    A mismatch then is the mart catching up (stale, a warning), never an error that cries wolf."""
    load(dagster_instance, warehouse_conn, first_load_done=False)
    run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}")
    warehouse_conn.execute(
        "UPDATE rnp_daily SET orders_sum = orders_sum + 0.01 WHERE cabinet_id = 'c1' AND day = %s AND nm_id = 7",
        (TODAY,),
    )
    found = evaluations(run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}", job="rnp_daily_check"))
    filling = found[("orders_match_wb_orders", f"c1|{TODAY}")]
    assert not filling.passed and filling.severity == AssetCheckSeverity.WARN, filling.description
    assert filling.metadata["stale"].value is True
    assert "still on their first load: the mart is catching up" in str(filling.description)

    # Once the first loads are done, the same mismatch is an error.
    confirm_feeds(warehouse_conn, "c1")
    found = evaluations(run_range(dagster_instance, f"c1|{Y}", f"c1|{TODAY}", job="rnp_daily_check"))
    wrong = found[("orders_match_wb_orders", f"c1|{TODAY}")]
    assert not wrong.passed and wrong.severity == AssetCheckSeverity.ERROR
