"""Keeps the dynamic ``cabinet`` partition dimension in step with the cabinets table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from dagster import SensorEvaluationContext, SensorResult, SkipReason, sensor

from optima_pipelines.errors import OptimaError
from optima_pipelines.orchestration.cadences import sensor_status
from optima_pipelines.partitions import CABINETS, CABINETS_NAME
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.warehouse.cabinets import list_cabinets


@dataclass(frozen=True)
class PartitionPlan:
    to_add: list[str]
    #: Partitions whose cabinet is no longer in the table. They are kept: deleting a dynamic
    #: partition hides its materialization history, and the cabinet's data stays in the warehouse.
    orphaned: list[str]


def plan_cabinet_partitions(table_ids: Sequence[str], existing: Sequence[str]) -> PartitionPlan:
    table, known = set(table_ids), set(existing)
    return PartitionPlan(to_add=sorted(table - known), orphaned=sorted(known - table))


@sensor(
    name="cabinet_partitions_sensor",
    minimum_interval_seconds=30,
    default_status=sensor_status("cabinet_partitions_sensor"),
    description="Adds every cabinet of the cabinets table to the dynamic `cabinet` partition dimension. "
    "Never removes one: a cabinet deleted from the table keeps its partitions and its data.",
)
def cabinet_partitions_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        with warehouse.connect() as conn:
            table_ids = [c.id for c in list_cabinets(conn)]
    except (OptimaError, psycopg.Error) as exc:
        # A failed read is never "no cabinets": change nothing and say why.
        return SkipReason(f"could not read the cabinets table: {exc.__class__.__name__}: {exc}")
    plan = plan_cabinet_partitions(table_ids, context.instance.get_dynamic_partitions(CABINETS_NAME))
    if plan.orphaned:
        context.log.info(f"cabinets no longer in the table, partitions kept: {', '.join(plan.orphaned)}")
    if not plan.to_add:
        return SkipReason(f"{len(table_ids)} cabinets, all already partitions")
    context.log.info(f"adding cabinet partitions: {', '.join(plan.to_add)}")
    return SensorResult(dynamic_partitions_requests=[CABINETS.build_add_request(plan.to_add)])
