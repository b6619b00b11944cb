"""The one Definitions object of the ``optima_pipelines`` code location, assembled from plain lists."""

from __future__ import annotations

from dagster import Definitions, EnvVar

from optima_pipelines import logs
from optima_pipelines.assets.example import cabinet_status_summary
from optima_pipelines.ops.retention import prune_runs_job, prune_runs_schedule
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.cabinets import cabinet_partitions_sensor

# Every process that loads the code location (code server, run workers) logs with run id and
# cabinet on each line, and never a token.
logs.install()

ASSETS = [cabinet_status_summary]
JOBS = [prune_runs_job]
SCHEDULES = [prune_runs_schedule]
SENSORS = [cabinet_partitions_sensor]

RESOURCES = {
    "warehouse": Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL")),
}

defs = Definitions(assets=ASSETS, jobs=JOBS, schedules=SCHEDULES, sensors=SENSORS, resources=RESOURCES)
