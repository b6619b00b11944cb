"""The РНП in the code location: lineage from the WB feeds, checks, jobs, cadences, queue tags."""

from __future__ import annotations

from dagster import AssetKey

from optima_pipelines.definitions import defs
from optima_pipelines.orchestration.run_coordinator import derive_gate_tags


def test_lineage_runs_from_the_wb_feeds_to_rnp_daily():
    graph = defs.get_repository_def().asset_graph

    def parents(key: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(AssetKey(key)).parent_keys}

    assert parents("rnp_sales") == {"wb_orders", "wb_sales"}
    assert parents("rnp_ads") == {"ad_campaign_stats"}
    assert parents("rnp_finance") == {"wb_report_lines", "wb_orders"}
    assert parents("rnp_daily") == {"rnp_sales", "rnp_ads", "rnp_finance", "rnp_funnel_stats", "stocks"}
    checks = {k.name for k in graph.get_check_keys_for_assets({AssetKey("rnp_daily")})}
    assert checks == {"orders_match_wb_orders", "ad_spend_matches_ad_campaign_stats", "payout_matches_finance_lines"}


def test_cadences_sensor_and_jobs_are_registered():
    repo = defs.get_repository_def()
    schedules = {s.name: (s.cron_schedule, s.execution_timezone, s.job_name) for s in repo.schedule_defs}
    assert schedules["rnp_merge_sync"] == ("0 6 * * *", "Europe/Moscow", "rnp_recompute")
    assert schedules["partition_manager_weekly"] == ("0 3 * * 1", "UTC", "partition_manager")
    assert repo.get_sensor_def("rnp_reaggregate_sensor").job_name == "rnp_recompute"
    assert {"rnp_recompute", "rnp_daily_check", "partition_manager"} <= {j.name for j in repo.get_all_jobs()}


def test_runs_launched_from_the_ui_are_re_aggregation_without_a_cabinet_gate():
    # A backfill over several cabinets: queued as re-aggregation, not held behind any cabinet's WB work,
    # in the lane of what a person waits on.
    tags = derive_gate_tags(
        {"dagster/asset_partition_range_start": "a|2026-01-01", "dagster/asset_partition_range_end": "b|2026-01-31"},
        ["rnp_sales", "rnp_daily"],
    )
    assert tags == {"optima/queue": "re-aggregate", "optima/lane": "user"}
