"""example-jobs: the template's schedule, declared in the cadence registry like every other cadence."""

from __future__ import annotations

from dagster import ScheduleDefinition

from optima_pipelines.assets.example import cabinet_status_summary_job
from optima_pipelines.orchestration.cadences import cadence, schedule_status

_CADENCE = cadence("cabinet_status_summary_schedule")

# Stopped by default: the template has no business purpose (the original's example-jobs queue had
# no cadence); switch it on in the UI to watch the pattern run.
cabinet_status_summary_schedule = ScheduleDefinition(
    name=_CADENCE.name,
    job=cabinet_status_summary_job,
    cron_schedule=_CADENCE.cadence,
    execution_timezone=_CADENCE.timezone,
    default_status=schedule_status(_CADENCE.name, running=False),
    description="The template's schedule: counts cabinets by status once a day.",
)
