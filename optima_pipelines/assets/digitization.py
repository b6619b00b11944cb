"""Digitization: WB orders and sales/returns, by cabinet × Moscow day (the `digitization-sync` queue).

The assets `wb_orders` and `wb_sales` are the tables of the same names; each `cabinet|day`
partition holds the rows whose Moscow `date` is that day. Materializing a partition reloads that
day from WB. The increment, the nightly backfill and user imports are ``SyncJobSpec``s of the one
sync pipeline (jobs/wb_sync.py): they load WB's change feed and record a materialization of every
`cabinet|day` partition whose rows changed, so the partition grid and the РНП re-aggregation see
exactly which days changed, old ones included. The partition assets are ``sync_partition_asset``s
too: their metadata adds ``fetch`` (day, range or memo: a backfill fetches WB's feed once) and
``rows_in_day``.
"""

from dagster import AssetsDefinition

from optima_pipelines.assets.rnp import recompute_in_run
from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import digitization as dg
from optima_pipelines.sync.runs import Sync, rows_in_day

QUEUE = dg.QUEUE


def _feed_asset(feed: dg.Feed, load: Sync, description: str) -> AssetsDefinition:
    return sync_partition_asset(
        feed.asset,
        "digitization",
        {feed.asset: description},
        load,
        extra=lambda warehouse, cabinet_id, day: {
            "rows_in_day": rows_in_day(warehouse.connect, feed.table, cabinet_id, day)
        },
    )


wb_orders = _feed_asset(
    dg.ORDERS,
    dg.sync_orders_day,
    "WB orders (statistics /api/v1/supplier/orders): one row per order (srid) with its current state, "
    "cancellation included, in the partition of the order's Moscow day.",
)
wb_sales = _feed_asset(
    dg.SALES,
    dg.sync_sales_day,
    "WB sales and returns (statistics /api/v1/supplier/sales): one row per saleID (S… sale, R… return), "
    "in the partition of the sale's Moscow day.",
)


# -- Change-feed jobs: the increment, the nightly backfill, user imports ------------------------

#: The feeds load their own figures, failures included (sync/digitization.py): the specs name none.
#: A sweep's cabinet that failed transiently is retried through the orders feed's resume time (the
#: resume sensor runs the increment, which catches both feeds up).
INCREMENT_SPEC = SyncJobSpec(
    "digitization_increment",
    QUEUE,
    (),
    dg.sync_increment,
    "Orders and sales changed since the stored cursor (flag=0).",
    resume_feed=dg.ORDERS.name,
)
BACKFILL_SPEC = SyncJobSpec(
    "digitization_backfill",
    QUEUE,
    (),
    dg.sync_window,
    "WB's change feed over the last window_days (default 90) days.",
    resume_feed=dg.ORDERS.name,
)


IMPORT_SPEC = SyncJobSpec(
    "digitization_import",
    QUEUE,
    (),
    dg.sync_window,
    "A user's feed import: everything from date_from to today, and the РНП of those days.",
    user_trigger="user_import",
    after_sync=recompute_in_run,
)
digitization_increment_job = cabinet_sync_job(INCREMENT_SPEC)
digitization_backfill_job = cabinet_sync_job(BACKFILL_SPEC)
digitization_import_job = cabinet_sync_job(IMPORT_SPEC)
digitization_increment_sweep = sweep_job(INCREMENT_SPEC)
digitization_backfill_sweep = sweep_job(BACKFILL_SPEC)
