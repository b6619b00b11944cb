"""Stocks on WB's warehouses by cabinet × Moscow day (the `inventory-sync` queue, hourly) → ``stocks``."""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from datetime import date

from dagster import Failure

from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import inventory
from optima_pipelines.timeutil import today_moscow


def _today_only(cabinet_id: str, day: date) -> None:
    today = today_moscow()
    if day != today:
        raise Failure(
            description=f"stocks of {cabinet_id}|{day} cannot be reloaded: WB serves only the stocks of now "
            f"(today is {today}); each day keeps the last snapshot taken on it",
            allow_retries=False,
        )


stocks = sync_partition_asset(
    inventory.FEED,
    "inventory",
    {
        inventory.FEED: "Stock of each product size on each WB warehouse (WB's stocks report): on hand, on the "
        "way to buyers, on the way back. WB keeps no history, so each Moscow day keeps its last snapshot; "
        "only today's partition can be taken (again), earlier days are what they were.",
    },
    inventory.sync_day,
    check=_today_only,
)


INVENTORY_SYNC_SPEC = SyncJobSpec(
    name="inventory_sync",
    queue=inventory.QUEUE,
    feeds=(inventory.FEED,),
    body=inventory.sync,
    description="A snapshot of one cabinet's stocks on WB's warehouses, made today's.",
    state_feed=inventory.STATE_FEED,
)
inventory_sync_job = cabinet_sync_job(INVENTORY_SYNC_SPEC)
inventory_sync_sweep = sweep_job(INVENTORY_SYNC_SPEC)
