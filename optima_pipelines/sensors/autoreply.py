"""autoreply-sync every 15 minutes, a sweep over the cabinets that have reply rules; autoreply-answer-send requests.

The sweep's cabinets are the house fan-out's (orchestration/fanout.py: active cabinets, no live user import, no
run of the sync already queued or running), narrowed to cabinets with at least one enabled rule.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from dagster import SensorEvaluationContext, SkipReason, sensor

from optima_pipelines.engines import autoreply
from optima_pipelines.errors import InvalidInput, OptimaError
from optima_pipelines.jobs.autoreply import autoreply_answer_send_job, autoreply_sync_job, autoreply_sync_sweep
from optima_pipelines.orchestration.cadences import cadence, sensor_status, tick_seconds
from optima_pipelines.orchestration.fanout import active_cabinets, plan_fanout
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import Sweep, sweep_busy, window_sweep
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import Request

_CADENCE = cadence("autoreply_sync_sensor")
INTERVAL = _CADENCE.interval_seconds or 900


SWEEP = Sweep(autoreply_sync_sweep, autoreply_sync_job, autoreply.SYNC_QUEUE)


@sensor(
    name=_CADENCE.name,
    job=autoreply_sync_sweep,
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
        candidates = [c for c in active if c in ruled]
        if not candidates:
            return SkipReason(f"window {window}: no active cabinet has reply rules")
        busy = sweep_busy(context.instance, warehouse, SWEEP)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
    return window_sweep(context, SWEEP, _CADENCE.name, window, plan_fanout(candidates, live, busy))


def validate_answer(conn: psycopg.Connection, request: Request) -> dict[str, Any]:
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    autoreply.check_send_payload(request.payload)
    return cabinet_run_config(autoreply_answer_send_job.name, request.cabinet_id, request_id=request.id)


REQUEST_HANDLERS = [
    RequestHandler(autoreply.SEND_KIND, autoreply_answer_send_job, autoreply.SEND_QUEUE, validate_answer),
]
