"""The catch-up of the cron cadences' sweeps (sensors/wb_sync.py's ``cron_catchup_sensor``): the
nightly digitization backfill, finance and product cards, and the hourly stocks."""

from __future__ import annotations

from optima_pipelines.sensors.catalog import catalog_cards_schedule
from optima_pipelines.sensors.digitization import digitization_backfill_schedule
from optima_pipelines.sensors.finance import finance_sync_schedule
from optima_pipelines.sensors.inventory import inventory_sync_schedule
from optima_pipelines.sensors.wb_sync import cron_catchup_sensor

cron_sweep_catchup_sensor = cron_catchup_sensor(
    [digitization_backfill_schedule, finance_sync_schedule, catalog_cards_schedule, inventory_sync_schedule]
)
