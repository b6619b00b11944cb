"""News cadence: WB's news into the knowledge base, cron 15 */3 * * * (Moscow), one run (not per cabinet)."""

from __future__ import annotations

import psycopg
from dagster import RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from optima_pipelines.assets.news import news_sync_job
from optima_pipelines.errors import OptimaError
from optima_pipelines.orchestration.cadences import cadence, schedule_status
from optima_pipelines.orchestration.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sync import news
from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.warehouse.cabinets import list_cabinets

_CADENCE = cadence("news_sync_schedule")


@schedule(
    name=_CADENCE.name,
    job=news_sync_job,
    cron_schedule=_CADENCE.cadence,
    execution_timezone=_CADENCE.timezone,
    default_status=schedule_status(_CADENCE.name),
    description="WB's news into the knowledge base (cron 15 */3 * * *, Moscow), with any active cabinet's "
    "token; one WB request a minute at most.",
)
def news_sync_schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
    tick = context.scheduled_execution_time.astimezone(MOSCOW).strftime("%Y-%m-%dT%H:%M")
    try:
        with warehouse.connect() as conn:
            usable = [c.id for c in list_cabinets(conn, status="active") if c.has_token]
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
    if not usable:
        return SkipReason(f"{tick}: no active cabinet with a WB token to read the news with")
    return RunRequest(
        run_key=f"news:{tick}",
        tags={**queue_tags(news.QUEUE, priority=PRIORITY_SCHEDULED), TAG_TRIGGER: "schedule", "optima/window": tick},
    )
