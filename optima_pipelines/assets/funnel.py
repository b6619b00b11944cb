"""The sales funnel per product and Moscow day (the `rnp-sections-sync` queue, hourly) → ``rnp_funnel_stats``."""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import AssetExecutionContext, Failure, MaterializeResult, asset

from optima_pipelines.assets.wb_sync import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SyncJobSpec,
    cabinet_and_day,
    cabinet_sync_job,
    fail_on_permanent,
    partition_trigger,
)
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.partitions import CABINET_DAY
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import funnel
from optima_pipelines.sync.runs import SyncInput, SyncRun


@asset(
    name=funnel.FEED,
    partitions_def=CABINET_DAY,
    group_name="funnel",
    kinds={"postgres"},
    retry_policy=DEFAULT_RETRY,
)
def rnp_funnel_stats(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """The sales funnel of each product on one Moscow day (WB's `sales-funnel/products` report for that
    day): card opens, add-to-cart, orders and their sum, buyouts and their sum, conversions, wishlist
    adds. Products with no activity that day have no row. WB serves a year at most: this table keeps
    the history. Materializing a partition reloads that day."""
    cabinet_id, day = cabinet_and_day(context)
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            run = funnel.sync_funnel(
                warehouse.connect, client, cabinet_id, [day], run_id=context.run_id, trigger=trigger
            )
    except Exception as exc:
        fail_on_permanent(exc, f"{funnel.FEED} {cabinet_id}|{day}")
        raise
    if run.deferred_until is not None:
        raise Failure(
            description=f"WB paused the funnel of cabinet {cabinet_id} until {run.deferred_until.isoformat()} "
            f"({run.deferred_reason}); materialize {cabinet_id}|{day} again after that",
            allow_retries=False,
        )
    return MaterializeResult(metadata={**run.day_metadata(day), "wb_requests": run.requests, "trigger": trigger})


def _hourly(call: SyncInput) -> list[SyncRun]:
    return [
        funnel.sync_funnel(
            call.connect,
            call.client(),
            call.cabinet_id,
            funnel.funnel_window(days=call.window_days),
            run_id=call.run_id,
            trigger=call.trigger,
            state_feed=funnel.STATE_FEED,
        )
    ]


funnel_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="funnel_sync",
        queue=funnel.QUEUE,
        feeds=(funnel.FEED,),
        body=_hourly,
        description="One cabinet's sales funnel of today and the two days before, one WB request per day.",
        state_feed=funnel.STATE_FEED,
    )
)
