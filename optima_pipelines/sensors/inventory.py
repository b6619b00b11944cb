"""Inventory cadence: a stock snapshot every hour per active cabinet (cron 0 * * * *)."""

from __future__ import annotations

from optima_pipelines.assets.inventory import inventory_sync_job, inventory_sync_sweep
from optima_pipelines.sensors.wb_sync import Sweep, cron_fanout_schedule
from optima_pipelines.sync import inventory

inventory_sync_schedule = cron_fanout_schedule(
    "inventory_sync_schedule",
    Sweep(inventory_sync_sweep, inventory_sync_job, inventory.QUEUE),
    inventory.STATE_FEED,
    "A snapshot of stocks on WB's warehouses, today's",
)
