"""The one Definitions object of the ``optima_pipelines`` code location, assembled from plain lists."""

from __future__ import annotations

from dagster import Definitions, EnvVar

from optima_pipelines.assets.example import cabinet_status_summary
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sensors.cabinets import cabinet_partitions_sensor

ASSETS = [cabinet_status_summary]
SENSORS = [cabinet_partitions_sensor]

_warehouse = Warehouse(database_url=EnvVar("OPTIMA_DATABASE_URL"))
RESOURCES = {
    "warehouse": _warehouse,
    "wb": WbApi(warehouse=_warehouse),
}

defs = Definitions(assets=ASSETS, sensors=SENSORS, resources=RESOURCES)
