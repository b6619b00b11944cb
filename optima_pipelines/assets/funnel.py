"""The sales funnel per product and Moscow day (the `rnp-sections-sync` queue, hourly) → ``rnp_funnel_stats``."""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import funnel

rnp_funnel_stats = sync_partition_asset(
    funnel.FEED,
    "funnel",
    {
        funnel.FEED: "The sales funnel of each product on one Moscow day (WB's `sales-funnel/products` "
        "report for that day): card opens, add-to-cart, orders and their sum, buyouts and their sum, "
        "conversions, wishlist adds. Products with no activity that day have no row. WB serves a year at "
        "most: this table keeps the history. Materializing a partition reloads that day.",
    },
    funnel.sync_day,
)


FUNNEL_SYNC_SPEC = SyncJobSpec(
    name="funnel_sync",
    queue=funnel.QUEUE,
    feeds=(funnel.FEED,),
    body=funnel.sync_window,
    description="One cabinet's sales funnel of today and the two days before, one WB request per day.",
    state_feed=funnel.STATE_FEED,
)
funnel_sync_job = cabinet_sync_job(FUNNEL_SYNC_SPEC)
funnel_sync_sweep = sweep_job(FUNNEL_SYNC_SPEC)
