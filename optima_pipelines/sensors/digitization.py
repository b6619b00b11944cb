"""Digitization cadences: the increment (interval sensor), the nightly backfill (schedule), user feed imports."""

from __future__ import annotations

import time
from datetime import date, datetime
from typing import Any

import psycopg
from dagster import (
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from optima_pipelines.assets.digitization import (
    QUEUE,
    digitization_backfill_job,
    digitization_import_job,
    digitization_increment_job,
)
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.cadences import cadence, schedule_status, sensor_status, tick_seconds
from optima_pipelines.errors import InvalidInput, OptimaError
from optima_pipelines.fanout import active_cabinets, busy_cabinets, plan_fanout
from optima_pipelines.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.requests import IMPORT_FEEDS, Request
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.runconfig import cabinet_run_config
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sync.digitization import WB_HORIZON_DAYS, check_date_from
from optima_pipelines.sync.state import due_resumes
from optima_pipelines.timeutil import MOSCOW, today_moscow

INCREMENT = cadence("digitization_increment_sensor")
BACKFILL = cadence("digitization_backfill_schedule")
FEED_NAMES = ["orders", "sales"]


def _run_request(
    job_name: str, cabinet_id: str, run_key: str, window: str, extra_config: dict[str, Any] | None = None
) -> RunRequest:
    return RunRequest(
        run_key=run_key,
        job_name=job_name,
        run_config=cabinet_run_config(job_name, cabinet_id, **(extra_config or {})),
        tags={
            **queue_tags(QUEUE, cabinet_id=cabinet_id, priority=PRIORITY_SCHEDULED),
            TAG_TRIGGER: "schedule",
            "optima/window": window,
        },
    )


def increment_window(now_epoch: float, interval_seconds: int) -> int:
    """The cadence window number: one increment per cabinet per window (the original's jobId)."""
    return int(now_epoch // interval_seconds)


@sensor(
    name=INCREMENT.name,
    job=digitization_increment_job,
    minimum_interval_seconds=tick_seconds(INCREMENT.interval_seconds or 1800),
    default_status=sensor_status(INCREMENT.name),
    description=f"The orders/sales increment, {INCREMENT.cadence}, per active cabinet: WB's change feed "
    "from the stored cursor. Also resumes a cabinet whose increment was deferred by a WB rate limit.",
)
def digitization_increment_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    interval = INCREMENT.interval_seconds or 1800
    now = datetime.now(tz=MOSCOW)
    window = increment_window(time.time(), interval)
    try:
        active, live = active_cabinets(warehouse)
        with warehouse.connect() as conn:
            resumes = due_resumes(conn, FEED_NAMES, now)
            paused = {
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT cabinet_id FROM sync_state WHERE feed = ANY(%s) AND resume_at > %s",
                    (FEED_NAMES, now),
                ).fetchall()
            }
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
    busy = busy_cabinets(context.instance, digitization_increment_job.name)
    plan = plan_fanout(active, live, busy, paused)
    requests = [
        _run_request(digitization_increment_job.name, c, f"increment:{c}:{window}", str(window)) for c in plan.launch
    ]
    # A deferred increment resumes as soon as its pause is over, not at the next window.
    for cabinet, resume_at in resumes.items():
        if cabinet in set(active) - live - busy and cabinet not in plan.launch:
            requests.append(
                _run_request(
                    digitization_increment_job.name,
                    cabinet,
                    f"increment:{cabinet}:resume:{int(resume_at.timestamp())}",
                    str(window),
                )
            )
    if plan.skipped:
        context.log.info(f"skipped: {plan.skipped}")
    if not requests:
        return SkipReason(f"window {window}: nothing to launch ({len(plan.skipped)} skipped)")
    return SensorResult(run_requests=requests)


@schedule(
    name=BACKFILL.name,
    job=digitization_backfill_job,
    cron_schedule=BACKFILL.cadence,
    execution_timezone=BACKFILL.timezone,
    default_status=schedule_status(BACKFILL.name),
    description="Nightly: WB's change feed over the last 90 days per active cabinet, one request per WB page.",
)
def digitization_backfill_schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
    tick = context.scheduled_execution_time.astimezone(MOSCOW)
    window = tick.strftime("%Y-%m-%dT%H:%M")
    try:
        active, live = active_cabinets(warehouse)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
    plan = plan_fanout(active, live, busy_cabinets(context.instance, digitization_backfill_job.name))
    if not plan.launch:
        return SkipReason(f"{window}: nothing to launch; skipped {plan.skipped}")
    return [
        _run_request(
            digitization_backfill_job.name, c, f"backfill:{c}:{window}", window, {"window_days": WB_HORIZON_DAYS}
        )
        for c in plan.launch
    ]


# -- import-user-feeds requests -------------------------------------------------------------------


def validate_import_request(conn: psycopg.Connection, request: Request, today: date | None = None) -> dict[str, Any]:
    """Run config for an import-user-feeds request, or InvalidInput/UnknownCabinet naming the problem."""
    today = today or today_moscow()
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    payload = request.payload
    date_from = check_date_from(payload.get("dateFrom") if isinstance(payload, dict) else None, today)
    return cabinet_run_config(
        digitization_import_job.name, request.cabinet_id, date_from=date_from.isoformat(), request_id=request.id
    )


REQUEST_HANDLERS = [
    RequestHandler(IMPORT_FEEDS, digitization_import_job, QUEUE, validate_import_request),
]
