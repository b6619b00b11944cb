"""Ads: campaigns (by cabinet) and their statistics by cabinet × Moscow day (the `rnp-ads-sync` queue, every 5 min).

``ad_campaign_stats`` rows are per campaign, day, app and product; ``is_associated`` marks products
WB attributed to a campaign without it advertising them. A partition materialization means "this
day's statistics changed"; the РНП ads rollup recomputes it.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import AssetExecutionContext, Failure, MaterializeResult, asset

from optima_pipelines.assets.wb_sync import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SyncJobSpec,
    cabinet_and_day,
    cabinet_sync_job,
    emit_cabinet,
    emit_days,
    fail_on_permanent,
    partition_trigger,
)
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.partitions import CABINET_DAY, CABINETS
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncInput, SyncRun


@asset(
    name=ads.CAMPAIGNS_FEED,
    partitions_def=CABINETS,
    group_name="ads",
    kinds={"postgres"},
    retry_policy=DEFAULT_RETRY,
)
def ad_campaigns(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """The cabinet's ad campaigns (`GET /api/advert/v2/adverts`): status, bid type, payment type, and
    in `ad_campaign_products` the products each one advertises with their current bids (kopecks).
    Refreshed by every ads sync and every autobidder-sync request."""
    cabinet_id = context.partition_key
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            run, campaigns = ads.load_campaigns(
                warehouse.connect, client, cabinet_id, run_id=context.run_id, trigger=trigger
            )
        with warehouse.connect() as conn, conn.transaction():
            run.record(conn)
    except Exception as exc:
        fail_on_permanent(exc, f"{ads.CAMPAIGNS_FEED} of cabinet {cabinet_id}")
        raise
    return MaterializeResult(
        metadata={
            "campaigns": len(campaigns),
            "rows_fetched": run.rows_fetched,
            "rows_inserted": run.merge.inserted,
            "rows_updated": run.merge.updated,
            "rows_deleted": run.rows_deleted,
            "trigger": trigger,
        }
    )


@asset(
    name=ads.STATS_FEED,
    partitions_def=CABINET_DAY,
    group_name="ads",
    kinds={"postgres"},
    retry_policy=DEFAULT_RETRY,
)
def ad_campaign_stats(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """Ad statistics (`GET /adv/v3/fullstats`) per campaign, Moscow day, app (1 site, 32 Android, 64 iOS)
    and product: views, clicks, add-to-basket, orders, items, cancellations, spend and ordered value
    (rubles). Products WB shows but the campaign did not advertise are kept with `is_associated`.
    Materializing a partition reloads that day for every campaign WB serves statistics for."""
    cabinet_id, day = cabinet_and_day(context)
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            campaigns_run, stats_run = ads.load_stats_day(
                warehouse.connect, client, cabinet_id, day, run_id=context.run_id, trigger=trigger
            )
    except Exception as exc:
        fail_on_permanent(exc, f"{ads.STATS_FEED} {cabinet_id}|{day}")
        raise
    if stats_run.deferred_until is not None:
        raise Failure(
            description=f"WB paused ad statistics of cabinet {cabinet_id} until {stats_run.deferred_until.isoformat()} "
            f"({stats_run.deferred_reason}); materialize {cabinet_id}|{day} again after that",
            allow_retries=False,
        )
    emit_cabinet(context, campaigns_run, trigger=trigger)
    emit_days(context, [stats_run], trigger=trigger, skip=(ads.STATS_FEED, day))
    return MaterializeResult(
        metadata={**stats_run.day_metadata(day), "wb_requests": stats_run.requests, "trigger": trigger}
    )


def _scheduled(call: SyncInput) -> list[SyncRun]:
    return ads.sync_ads(
        call.connect,
        call.client(),
        call.cabinet_id,
        run_id=call.run_id,
        trigger=call.trigger,
        days=call.window_days,
    )


ads_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="ads_sync",
        queue=ads.QUEUE,
        feeds=(ads.CAMPAIGNS_FEED, ads.STATS_FEED),
        body=_scheduled,
        description="One cabinet's campaigns, then the ad statistics of today and the two days before "
        "(a cycle WB's 20-second fullstats pace interrupts resumes where it stopped).",
        state_feed=ads.STATE_FEED,
        cabinet_partitioned=(ads.CAMPAIGNS_FEED,),
    )
)
