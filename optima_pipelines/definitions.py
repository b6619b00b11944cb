"""The one Definitions object of the ``optima_pipelines`` code location, assembled from plain lists."""

from __future__ import annotations

import warnings

from dagster import BetaWarning, Definitions, EnvVar, in_process_executor

from optima_pipelines import logs
from optima_pipelines.assets.digitization import (
    digitization_backfill_job,
    digitization_import_job,
    digitization_increment_job,
    wb_orders,
    wb_sales,
)
from optima_pipelines.assets.example import cabinet_status_summary
from optima_pipelines.ops.retention import prune_runs_job, prune_runs_schedule
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sensors.cabinets import cabinet_partitions_sensor
from optima_pipelines.sensors.digitization import digitization_backfill_schedule, digitization_increment_sensor
from optima_pipelines.sensors.queue import account_busy_sensor, dead_run_sensor
from optima_pipelines.sensors.requests import requests_sensor

# Dagster 1.13 itself passes `owners` when it binds a sensor's jobs, and warns about it on every
# load of every process; nothing of ours uses owners.
warnings.filterwarnings("ignore", message="Parameter `owners` of initializer", category=BetaWarning)

# Every process that loads the code location (code server, run workers) logs with run id and
# cabinet on each line, and never a token.
logs.install()

ASSETS = [wb_orders, wb_sales, cabinet_status_summary]
JOBS = [digitization_increment_job, digitization_backfill_job, digitization_import_job, prune_runs_job]
SCHEDULES = [digitization_backfill_schedule, prune_runs_schedule]
SENSORS = [
    cabinet_partitions_sensor,
    requests_sensor,
    digitization_increment_sensor,
    account_busy_sensor,
    dead_run_sensor,
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
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=RESOURCES,
    executor=in_process_executor,
)
