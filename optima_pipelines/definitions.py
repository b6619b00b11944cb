"""The one Definitions object of the ``optima_pipelines`` code location, assembled from plain lists."""

from __future__ import annotations

from typing import Any

from dagster import Definitions, EnvVar

from optima_pipelines.assets.example import cabinet_status_summary
from optima_pipelines.assets.rnp import (
    rnp_ads,
    rnp_daily,
    rnp_daily_check_job,
    rnp_daily_checks,
    rnp_finance,
    rnp_recompute_job,
    rnp_sales,
)
from optima_pipelines.cadences import SCHEDULES
from optima_pipelines.jobs.partition_manager import partition_manager_job
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.cabinets import cabinet_partitions_sensor
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor

ASSETS = [cabinet_status_summary, rnp_sales, rnp_ads, rnp_finance, rnp_daily]
ASSET_CHECKS = [rnp_daily_checks]
# An asset job and an op job: Dagster's name for the union of the two is not public.
JOBS: list[Any] = [rnp_recompute_job, rnp_daily_check_job, partition_manager_job]
SENSORS = [cabinet_partitions_sensor, rnp_reaggregate_sensor]

RESOURCES = {
    "warehouse": Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL")),
}

defs = Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=RESOURCES,
)
