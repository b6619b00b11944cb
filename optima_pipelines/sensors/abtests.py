"""The A/B test metrics schedule: one run per tick for every running test (no WB call, no cabinet
gate), skipped when no test is running."""

from __future__ import annotations

import psycopg
from dagster import RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from optima_pipelines.engines import abtests
from optima_pipelines.errors import OptimaError
from optima_pipelines.jobs.abtests import QUEUE, ab_test_metrics_job
from optima_pipelines.orchestration.cadences import cadence, schedule_status
from optima_pipelines.orchestration.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.timeutil import MOSCOW

_AB = cadence("ab_test_metrics_schedule")


@schedule(
    name=_AB.name,
    job=ab_test_metrics_job,
    cron_schedule=_AB.cadence,
    execution_timezone=_AB.timezone,
    default_status=schedule_status(_AB.name),
    description=f"A/B test metrics of every running test from the synced ads and funnel data (cron {_AB.cadence}, "
    f"{_AB.timezone}; skipped when no test is running).",
)
def ab_test_metrics_schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
    tick = context.scheduled_execution_time.astimezone(MOSCOW).strftime("%Y-%m-%dT%H:%M")
    try:
        with warehouse.connect() as conn:
            running = abtests.running_tests(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the A/B tests: {exc.__class__.__name__}: {exc}")
    if not running:
        return SkipReason(f"{tick}: no running A/B test")
    return RunRequest(
        run_key=f"{ab_test_metrics_job.name}:{tick}",
        tags={**queue_tags(QUEUE, priority=PRIORITY_SCHEDULED), TAG_TRIGGER: "schedule", "optima/window": tick},
    )
