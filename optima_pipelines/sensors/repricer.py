"""repricer-schedule: a run per (cabinet, rule interval) every N hours, kept in step with ``repricer_rules``.

Dagster schedules are fixed when the code loads; the original registered one repeatable job per
(cabinet, interval) from the rules table at start. Here one sensor reads the rules table every
minute (one cheap query) and launches a run when a group enters a new slot of its interval: a new
interval runs at once, a removed one stops, with no reload. The run key
``repricer:<cabinet>:<interval>h:<slot start>`` makes each slot run once, across daemon restarts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
from dagster import (
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from optima_pipelines.engines import repricer
from optima_pipelines.errors import OptimaError
from optima_pipelines.jobs.repricer import repricer_job
from optima_pipelines.orchestration.cadences import cadence, sensor_status
from optima_pipelines.orchestration.fanout import busy_cabinets
from optima_pipelines.orchestration.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse

_CADENCE = cadence("repricer_sensor")


def run_request(due: repricer.Due) -> RunRequest:
    return RunRequest(
        run_key=due.run_key,
        job_name=repricer_job.name,
        run_config={
            "ops": {
                op_name(repricer_job.name): {
                    "config": {
                        "cabinet_id": due.cabinet_id,
                        "interval_hours": due.interval_hours,
                        "slot_start": due.start.isoformat(),
                    }
                }
            }
        },
        tags={
            **queue_tags(repricer.QUEUE, cabinet_id=due.cabinet_id, priority=PRIORITY_SCHEDULED),
            TAG_TRIGGER: "schedule",
            "optima/window": due.slot,
        },
    )


@sensor(
    name=_CADENCE.name,
    job=repricer_job,
    minimum_interval_seconds=_CADENCE.interval_seconds or 60,
    default_status=sensor_status(_CADENCE.name),
    description="Launches a repricer run per (cabinet, rule interval) when it enters a new slot of its interval, "
    "as the rules table says now.",
)
def repricer_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        with warehouse.connect() as conn:
            groups = repricer.due_groups(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read repricer_rules: {exc.__class__.__name__}: {exc}")
    launched = json.loads(context.cursor) if context.cursor else {}
    busy = busy_cabinets(context.instance, repricer_job.name) if groups else set()
    due, cursor = repricer.plan_due(groups, datetime.now(tz=UTC), launched, busy)
    if not due:
        context.update_cursor(json.dumps(cursor, sort_keys=True))
        return SkipReason(f"{len(groups)} rule group(s), none entered a new slot")
    return SensorResult(run_requests=[run_request(d) for d in due], cursor=json.dumps(cursor, sort_keys=True))
