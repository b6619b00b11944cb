"""Stocks on WB's warehouses by cabinet × Moscow day (the `inventory-sync` queue, hourly) → ``stocks``."""

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
from optima_pipelines.sync import inventory
from optima_pipelines.sync.runs import SyncInput, SyncRun
from optima_pipelines.timeutil import today_moscow


@asset(
    name=inventory.FEED,
    partitions_def=CABINET_DAY,
    group_name="inventory",
    kinds={"postgres"},
    retry_policy=DEFAULT_RETRY,
)
def stocks(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """Stock of each product size on each WB warehouse (WB's stocks report): on hand, on the way to
    buyers, on the way back. WB keeps no history, so each Moscow day keeps its last snapshot; only
    today's partition can be taken (again), earlier days are what they were."""
    cabinet_id, day = cabinet_and_day(context)
    today = today_moscow()
    if day != today:
        raise Failure(
            description=f"stocks of {cabinet_id}|{day} cannot be reloaded: WB serves only the stocks of now "
            f"(today is {today}); each day keeps the last snapshot taken on it",
            allow_retries=False,
        )
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            run = inventory.sync_stocks(
                warehouse.connect, client, cabinet_id, run_id=context.run_id, trigger=trigger, day=day
            )
    except Exception as exc:
        fail_on_permanent(exc, f"{inventory.FEED} {cabinet_id}|{day}")
        raise
    if run.deferred_until is not None:
        raise Failure(
            description=f"WB paused the stocks report of cabinet {cabinet_id} until {run.deferred_until.isoformat()} "
            f"({run.deferred_reason}); nothing was written",
            allow_retries=False,
        )
    return MaterializeResult(metadata={**run.day_metadata(day), "wb_requests": run.requests, "trigger": trigger})


def _hourly(call: SyncInput) -> list[SyncRun]:
    return [
        inventory.sync_stocks(call.connect, call.client(), call.cabinet_id, run_id=call.run_id, trigger=call.trigger)
    ]


inventory_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="inventory_sync",
        queue=inventory.QUEUE,
        feeds=(inventory.FEED,),
        body=_hourly,
        description="A snapshot of one cabinet's stocks on WB's warehouses, made today's.",
        state_feed=inventory.STATE_FEED,
    )
)
