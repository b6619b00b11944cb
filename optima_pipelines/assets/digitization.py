"""Digitization: WB orders and sales/returns, by cabinet × Moscow day (the `digitization-sync` queue).

The assets `wb_orders` and `wb_sales` are the tables of the same names; each `cabinet|day`
partition holds the rows whose Moscow `date` is that day. Materializing a partition reloads that
day from WB. The increment, the nightly backfill and user imports are ``SyncJobSpec``s of the one
sync pipeline (assets/wb_sync.py): they load WB's change feed and record a materialization of every
`cabinet|day` partition whose rows changed, so the partition grid and the РНП re-aggregation see
exactly which days changed, old ones included.
"""

from dagster import AssetExecutionContext, Failure, MaterializeResult, MetadataValue, asset

from optima_pipelines.assets.wb_sync import cabinet_and_day, dagster_metadata, emit_days, partition_trigger
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, INTERACTIVE_MAX_WAIT_SECONDS, fail_on_permanent
from optima_pipelines.partitions import BACKFILL_TAG, CABINET_DAY
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import digitization as dg
from optima_pipelines.sync.changes import iso_days
from optima_pipelines.sync.runs import stored_runs
from optima_pipelines.warehouse.cabinets import get_cabinet

QUEUE = dg.QUEUE


def _feed_asset(feed: dg.Feed, description: str):
    @asset(
        name=feed.asset,
        partitions_def=CABINET_DAY,
        group_name="digitization",
        kinds={"postgres"},
        retry_policy=DEFAULT_RETRY,
        description=description,
    )
    def _asset(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
        cabinet_id, day = cabinet_and_day(context)
        trigger = partition_trigger(context)
        try:
            with warehouse.connect() as conn:
                get_cabinet(conn, cabinet_id)
            plan, run = dg.load_partition(
                warehouse.connect,
                lambda: wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS),
                feed,
                cabinet_id,
                day,
                backfill_id=context.run.tags.get(BACKFILL_TAG),
                run_id=context.run_id,
            )
        except Exception as exc:
            # A range fetch that failed after some pages: report the days they changed.
            emit_days(context, stored_runs(exc), trigger="backfill")
            fail_on_permanent(exc, f"{feed.asset} {cabinet_id}|{day}")
            raise
        if run.deferred_until is not None:
            raise Failure(
                description=f"WB paused {feed.name} requests of cabinet {cabinet_id} until "
                f"{run.deferred_until.isoformat()} ({run.deferred_reason}); nothing was loaded for {day}. "
                "Materialize the partition again after that time.",
                allow_retries=False,
            )
        # A range fetch also refreshed other days: record them as materialized too.
        emit_days(context, [run], trigger="backfill", skip=(feed.asset, day))
        return MaterializeResult(
            metadata={
                **dagster_metadata(run.change(day, trigger).to_metadata()),
                "fetch": plan.mode,
                "wb_pages": run.requests,
                "rows_fetched": run.rows_fetched,
                "rows_in_day": dg.day_rows(warehouse.connect, feed, cabinet_id, day),
                "changed_days": MetadataValue.json(iso_days(run.changed_days)),
            }
        )

    return _asset


wb_orders = _feed_asset(
    dg.ORDERS,
    "WB orders (statistics /api/v1/supplier/orders): one row per order (srid) with its current state, "
    "cancellation included, in the partition of the order's Moscow day.",
)
wb_sales = _feed_asset(
    dg.SALES,
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
    "A user's feed import: everything from date_from to today.",
    user_trigger="user_import",
)
digitization_increment_job = cabinet_sync_job(INCREMENT_SPEC)
digitization_backfill_job = cabinet_sync_job(BACKFILL_SPEC)
digitization_import_job = cabinet_sync_job(IMPORT_SPEC)
digitization_increment_sweep = sweep_job(INCREMENT_SPEC)
digitization_backfill_sweep = sweep_job(BACKFILL_SPEC)
