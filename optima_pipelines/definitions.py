"""The one Definitions object of the ``optima_pipelines`` code location, assembled from plain lists."""

from __future__ import annotations

from typing import Any

from dagster import Definitions, EnvVar, in_process_executor

from optima_pipelines import logs
from optima_pipelines.assets.ads import ad_campaign_stats, ad_campaigns, ads_sync_job, ads_sync_sweep
from optima_pipelines.assets.catalog import (
    catalog_cards_job,
    catalog_cards_sweep,
    catalog_full_job,
    catalog_prices_job,
    catalog_prices_sweep,
    prices_and_history,
    products,
)
from optima_pipelines.assets.digitization import (
    digitization_backfill_job,
    digitization_backfill_sweep,
    digitization_import_job,
    digitization_increment_job,
    digitization_increment_sweep,
    wb_orders,
    wb_sales,
)
from optima_pipelines.assets.example import cabinet_status_summary, cabinet_status_summary_job
from optima_pipelines.assets.finance import (
    finance_report_import_job,
    finance_sync_job,
    finance_sync_sweep,
    wb_report_lines,
)
from optima_pipelines.assets.freshness import feed_freshness_checks
from optima_pipelines.assets.funnel import funnel_sync_job, funnel_sync_sweep, rnp_funnel_stats
from optima_pipelines.assets.inventory import inventory_sync_job, inventory_sync_sweep, stocks
from optima_pipelines.assets.news import kb_articles, news_sync_job
from optima_pipelines.assets.rnp import rnp, rnp_daily_check_job, rnp_daily_checks, rnp_recompute_job
from optima_pipelines.jobs.abtests import ab_test_metrics_job
from optima_pipelines.jobs.autobidder import (
    autobidder_bid_engine_job,
    autobidder_bid_engine_sweep,
    autobidder_sync_job,
)
from optima_pipelines.jobs.autoreply import autoreply_answer_send_job, autoreply_sync_job, autoreply_sync_sweep
from optima_pipelines.jobs.landing import landing_replay_job
from optima_pipelines.jobs.partition_manager import partition_manager_job, partition_manager_weekly
from optima_pipelines.jobs.pricing_bulk import pricing_bulk_job
from optima_pipelines.jobs.repricer import repricer_job, repricer_sweep_job
from optima_pipelines.operations.retention import prune_runs_job, prune_runs_schedule
from optima_pipelines.orchestration.dagster_internals import enable_event_batches, print_run_logs_our_way
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sensors.abtests import ab_test_metrics_schedule
from optima_pipelines.sensors.ads import ads_sync_sensor
from optima_pipelines.sensors.autobidder import autobidder_bid_engine_sensor
from optima_pipelines.sensors.autoreply import autoreply_sync_sensor
from optima_pipelines.sensors.booking import booking_slot_monitor
from optima_pipelines.sensors.cabinets import cabinet_partitions_sensor
from optima_pipelines.sensors.catalog import catalog_cards_schedule, catalog_prices_sensor
from optima_pipelines.sensors.catchup import cron_sweep_catchup_sensor
from optima_pipelines.sensors.digitization import digitization_backfill_schedule, digitization_increment_sensor
from optima_pipelines.sensors.example import cabinet_status_summary_schedule
from optima_pipelines.sensors.finance import finance_sync_schedule
from optima_pipelines.sensors.freshness import feed_freshness_sensor
from optima_pipelines.sensors.funnel import funnel_sync_sensor
from optima_pipelines.sensors.inventory import inventory_sync_schedule
from optima_pipelines.sensors.news import news_sync_schedule
from optima_pipelines.sensors.queue import account_busy_sensor, dead_run_sensor
from optima_pipelines.sensors.repricer import repricer_sensor
from optima_pipelines.sensors.requests import requests_sensor
from optima_pipelines.sensors.rnp import rnp_merge_sync, rnp_reaggregate_sensor
from optima_pipelines.sensors.wb_sync import wb_sync_resume_sensor

# Every process that loads the code location (code server, run workers) logs with run id and
# cabinet on each line, and never a token.
logs.install()
# Every process that executes runs loads these definitions: its steps' materializations are stored in
# batches (dagster_internals.EVENT_BATCH_SIZE) unless DAGSTER_EVENT_BATCH_SIZE says otherwise.
enable_event_batches()
# Every run's log printed once a line, in OPTIMA_LOG_FORMAT, with its run id, job, queue and cabinet.
print_run_logs_our_way()

ASSETS = [
    # WB feeds
    wb_orders,
    wb_sales,
    wb_report_lines,
    ad_campaigns,
    ad_campaign_stats,
    rnp_funnel_stats,
    products,
    prices_and_history,
    stocks,
    kb_articles,
    # the РНП mart: rnp_sales, rnp_ads, rnp_finance and rnp_daily
    rnp,
    # the house template
    cabinet_status_summary,
]
ASSET_CHECKS = [rnp_daily_checks, feed_freshness_checks]
# Asset jobs and op jobs: Dagster's name for the union of the two is not public.
JOBS: list[Any] = [
    digitization_increment_job,
    digitization_backfill_job,
    digitization_import_job,
    finance_sync_job,
    finance_report_import_job,
    ads_sync_job,
    autobidder_sync_job,
    funnel_sync_job,
    catalog_cards_job,
    catalog_prices_job,
    catalog_full_job,
    inventory_sync_job,
    news_sync_job,
    rnp_recompute_job,
    rnp_daily_check_job,
    partition_manager_job,
    landing_replay_job,
    prune_runs_job,
    # the scheduled cadences' sweeps: one run per window over many cabinets (jobs/wb_sync.py)
    digitization_increment_sweep,
    digitization_backfill_sweep,
    finance_sync_sweep,
    ads_sync_sweep,
    funnel_sync_sweep,
    catalog_cards_sweep,
    catalog_prices_sweep,
    inventory_sync_sweep,
    autoreply_sync_sweep,
    # the engines (issue 8)
    autobidder_bid_engine_job,
    autobidder_bid_engine_sweep,
    ab_test_metrics_job,
    repricer_job,
    repricer_sweep_job,
    pricing_bulk_job,
    autoreply_sync_job,
    autoreply_answer_send_job,
    # the house template
    cabinet_status_summary_job,
]
SCHEDULES = [
    digitization_backfill_schedule,
    finance_sync_schedule,
    catalog_cards_schedule,
    inventory_sync_schedule,
    news_sync_schedule,
    rnp_merge_sync,
    partition_manager_weekly,
    prune_runs_schedule,
    ab_test_metrics_schedule,
    cabinet_status_summary_schedule,
]
SENSORS = [
    cabinet_partitions_sensor,
    requests_sensor,
    digitization_increment_sensor,
    ads_sync_sensor,
    funnel_sync_sensor,
    catalog_prices_sensor,
    wb_sync_resume_sensor,
    feed_freshness_sensor,
    cron_sweep_catchup_sensor,
    rnp_reaggregate_sensor,
    account_busy_sensor,
    dead_run_sensor,
    autobidder_bid_engine_sensor,
    booking_slot_monitor,
    repricer_sensor,
    autoreply_sync_sensor,
]

_warehouse = Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL"))
RESOURCES = {
    "warehouse": _warehouse,
    "wb": WbApi(warehouse=_warehouse),
}


# One process per run: our jobs are one step each (an asset partition, or a sync op), and a step
# subprocess would cost another ~1.5 s interpreter start per run (DESIGN.md §4.13).
defs = Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=RESOURCES,
    executor=in_process_executor,
)
