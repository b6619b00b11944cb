"""repricer-schedule: apply a cabinet's repricer rules of one interval for one slot (engines/repricer.py).

One run per (cabinet, rule interval, slot), launched by ``repricer_sensor``: it refreshes the
cabinet's prices from WB (the catalog's own prices sync, so ``prices`` and ``price_history`` stay
current), decides each ruled product once per slot, and uploads the changes in tasks of ≤ 1000,
each followed to WB's final status. Outcomes: ``repricer_outcomes``; WB actions: ``engine_actions``.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from datetime import datetime

from dagster import Config, Failure, OpExecutionContext, job, op
from pydantic import Field

from optima_pipelines.engines import repricer
from optima_pipelines.jobs.wb_sync import locked_client
from optima_pipelines.orchestration.queues import queue_tags
from optima_pipelines.orchestration.retries import SCHEDULED_RETRY, fail_on_permanent
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import catalog
from optima_pipelines.warehouse.cabinets import get_cabinet

JOB = "repricer"


class RepricerConfig(Config):
    cabinet_id: str
    interval_hours: int = Field(ge=1, le=168)
    #: The slot's start (ISO 8601, UTC), from the sensor; the decisions are made once per slot.
    slot_start: str


def run_repricer(context: OpExecutionContext, config: RepricerConfig, warehouse: Warehouse, wb: WbApi) -> dict:
    cabinet_id = config.cabinet_id
    slot = repricer.slot_key(config.interval_hours, datetime.fromisoformat(config.slot_start))
    with warehouse.connect() as conn:
        get_cabinet(conn, cabinet_id)
        rules = repricer.load_rules(conn, cabinet_id, config.interval_hours)
        if not rules:
            context.log.info(f"repricer {cabinet_id} {slot}: no enabled rules of this interval any more")
            return {}
        with locked_client(warehouse, wb, cabinet_id) as client:
            if not repricer.slot_planned(conn, cabinet_id, slot):
                prices_run, _ = catalog.sync_prices(
                    warehouse.connect, client, cabinet_id, run_id=context.run_id, trigger="scheduled"
                )
                if prices_run.deferred_until is not None:
                    raise Failure(
                        description=f"repricer {cabinet_id} {slot}: WB paused the prices read until "
                        f"{prices_run.deferred_until}; decisions need current prices",
                    )
                repricer.plan_slot(conn, cabinet_id, slot, rules, context.run_id)
                conn.commit()
            counts = repricer.apply_slot(conn, client, cabinet_id, slot, context.run_id)
    context.log.info(f"repricer {cabinet_id} {slot}: {counts}")
    return counts


@op(name=op_name(JOB), retry_policy=SCHEDULED_RETRY, description="Apply one cabinet's repricer rules for one slot.")
def repricer_op(context: OpExecutionContext, config: RepricerConfig, warehouse: Warehouse, wb: WbApi) -> None:
    try:
        run_repricer(context, config, warehouse, wb)
    except Exception as exc:
        fail_on_permanent(exc, f"repricer of cabinet {config.cabinet_id}")
        raise


@job(
    name=JOB,
    tags=queue_tags(repricer.QUEUE),
    description="repricer-schedule: a cabinet's repricer rules of one interval, applied through WB's price upload "
    "tasks (each polled to its final status); per-product outcomes in repricer_outcomes.",
)
def repricer_job() -> None:
    repricer_op()
