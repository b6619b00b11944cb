"""autoreply-sync every 15 minutes per cabinet that has reply rules; autoreply-answer-send requests.

The sync's fan-out is the house one (orchestration/fanout.py: active cabinets, no live user import, no run of the
job already queued or running), narrowed to cabinets with at least one enabled rule: a cabinet
without rules costs no run.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from dagster import SensorEvaluationContext, SensorResult, SkipReason, sensor

from optima_pipelines.engines import autoreply
from optima_pipelines.errors import InvalidInput, OptimaError
from optima_pipelines.jobs.autoreply import autoreply_answer_send_job, autoreply_sync_job
from optima_pipelines.orchestration.cadences import cadence, sensor_status, tick_seconds
from optima_pipelines.orchestration.fanout import active_cabinets, busy_cabinets, plan_fanout
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import cabinet_request
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import Request

_CADENCE = cadence("autoreply_sync_sensor")
INTERVAL = _CADENCE.interval_seconds or 900


@sensor(
    name=_CADENCE.name,
    job=autoreply_sync_job,
    minimum_interval_seconds=tick_seconds(INTERVAL, most=60),
    default_status=sensor_status(_CADENCE.name),
    description=f"Review auto-replies ({_CADENCE.cadence}, per active cabinet with reply rules).",
)
def autoreply_sync_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    window = int(time.time() // INTERVAL)
    try:
        active, live = active_cabinets(warehouse)
        with warehouse.connect() as conn:
            ruled = autoreply.cabinets_with_rules(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
    candidates = [c for c in active if c in ruled]
    if not candidates:
        return SkipReason(f"window {window}: no active cabinet has reply rules")
    fanout = plan_fanout(candidates, live, busy_cabinets(context.instance, autoreply_sync_job.name))
    if not fanout.launch:
        return SkipReason(f"window {window}: nothing to launch; skipped {fanout.skipped}")
    return SensorResult(
        run_requests=[
            cabinet_request(
                autoreply_sync_job,
                autoreply.SYNC_QUEUE,
                c,
                f"{autoreply_sync_job.name}:{c}:{window}",
                str(window),
            )
            for c in fanout.launch
        ]
    )


def validate_answer(conn: psycopg.Connection, request: Request) -> dict[str, Any]:
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    autoreply.check_send_payload(request.payload)
    return cabinet_run_config(autoreply_answer_send_job.name, request.cabinet_id, request_id=request.id)


REQUEST_HANDLERS = [
    RequestHandler(autoreply.SEND_KIND, autoreply_answer_send_job, autoreply.SEND_QUEUE, validate_answer),
]
