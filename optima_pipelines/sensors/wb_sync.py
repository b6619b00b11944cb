"""Cadences of the WB syncs (digitization, finance, ads, funnel, catalog, inventory): the fan-out every
schedule and interval sensor of theirs shares, and the sensor that resumes a sync WB paused.

- **Fan-out** (``orchestration/fanout.py``'s rules): every active cabinet without a live user import, without a
  run of the same job queued or running, and not held in a WB pause, gets one run per cadence
  window. The run key is the job, the cabinet and the window (an interval sensor's window number,
  a schedule's intended tick time), so a tick evaluated twice launches nothing twice.
- **Resume**: a sync that WB's rate limit would have made wait (ADR-0051) stored what it had and
  its ``resume_at`` in sync_state; ``wb_sync_resume_sensor`` launches that sync's job again once the
  time has come, one run per pause (the run key holds its resume time).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg
from dagster import (
    JobDefinition,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from optima_pipelines.assets.ads import ads_sync_job
from optima_pipelines.assets.catalog import catalog_cards_job, catalog_prices_job
from optima_pipelines.assets.digitization import digitization_increment_job
from optima_pipelines.assets.finance import finance_sync_job
from optima_pipelines.assets.funnel import funnel_sync_job
from optima_pipelines.assets.inventory import inventory_sync_job
from optima_pipelines.errors import OptimaError
from optima_pipelines.orchestration.cadences import cadence, schedule_status, sensor_status, tick_seconds
from optima_pipelines.orchestration.fanout import FanoutPlan, active_cabinets, busy_cabinets, plan_fanout
from optima_pipelines.orchestration.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sync import ads, catalog, digitization, finance, funnel, inventory
from optima_pipelines.sync.runs import due_resumes_by_feed, paused_cabinets
from optima_pipelines.timeutil import MOSCOW

AnyJob = JobDefinition


def cabinet_request(job: AnyJob, queue: str, cabinet_id: str, run_key: str, window: str) -> RunRequest:
    return RunRequest(
        run_key=run_key,
        job_name=job.name,
        run_config=cabinet_run_config(job.name, cabinet_id),
        tags={
            **queue_tags(queue, cabinet_id=cabinet_id, priority=PRIORITY_SCHEDULED),
            TAG_TRIGGER: "schedule",
            "optima/window": window,
        },
    )


#: The sync_state feed(s) whose WB pause holds a cabinet's runs of a cadence back (none: never held).
StateFeeds = str | Sequence[str]


def plan(
    warehouse: Warehouse,
    context: SensorEvaluationContext | ScheduleEvaluationContext,
    job: AnyJob,
    state_feed: StateFeeds,
) -> FanoutPlan:
    """Which cabinets get a run of ``job`` now (raises psycopg.Error / OptimaError on a failed read)."""
    active, live = active_cabinets(warehouse)
    feeds = [state_feed] if isinstance(state_feed, str) else list(state_feed)
    paused: set[str] = set()
    if feeds:
        with warehouse.connect() as conn:
            paused = paused_cabinets(conn, feeds, datetime.now(tz=MOSCOW))
    return plan_fanout(active, live, busy_cabinets(context.instance, job.name), paused)


def interval_fanout_sensor(
    name: str, job: AnyJob, queue: str, state_feed: StateFeeds, description: str
) -> SensorDefinition:
    """An interval cadence from the registry: a run per cabinet per window of ``interval_seconds``."""
    entry = cadence(name)
    interval = entry.interval_seconds or 300

    @sensor(
        name=entry.name,
        job=job,
        minimum_interval_seconds=tick_seconds(interval),
        default_status=sensor_status(entry.name),
        description=f"{description} ({entry.cadence}, per active cabinet).",
    )
    def _sensor(context: SensorEvaluationContext, warehouse: Warehouse):
        window = int(time.time() // interval)
        try:
            fanout = plan(warehouse, context, job, state_feed)
        except (psycopg.Error, OptimaError) as exc:
            return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
        if fanout.skipped:
            context.log.info(f"window {window} skipped: {fanout.skipped}")
        if not fanout.launch:
            return SkipReason(f"window {window}: nothing to launch ({len(fanout.skipped)} skipped)")
        return SensorResult(
            run_requests=[
                cabinet_request(job, queue, c, f"{job.name}:{c}:{window}", str(window)) for c in fanout.launch
            ]
        )

    return _sensor


def cron_fanout_schedule(
    name: str, job: AnyJob, queue: str, state_feed: StateFeeds, description: str
) -> ScheduleDefinition:
    """A cron cadence from the registry: a run per cabinet per tick."""
    entry = cadence(name)

    @schedule(
        name=entry.name,
        job=job,
        cron_schedule=entry.cadence,
        execution_timezone=entry.timezone,
        default_status=schedule_status(entry.name),
        description=f"{description} (cron {entry.cadence}, {entry.timezone}, per active cabinet).",
    )
    def _schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
        tick = context.scheduled_execution_time.astimezone(MOSCOW).strftime("%Y-%m-%dT%H:%M")
        try:
            fanout = plan(warehouse, context, job, state_feed)
        except (psycopg.Error, OptimaError) as exc:
            return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
        if not fanout.launch:
            return SkipReason(f"{tick}: nothing to launch; skipped {fanout.skipped}")
        return [cabinet_request(job, queue, c, f"{job.name}:{c}:{tick}", tick) for c in fanout.launch]

    return _schedule


# -- resumes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resumable:
    state_feed: str
    job: JobDefinition
    queue: str


RESUMABLE: dict[str, Resumable] = {
    r.state_feed: r
    for r in (
        Resumable(finance.STATE_FEED, finance_sync_job, finance.QUEUE),
        Resumable(ads.STATE_FEED, ads_sync_job, ads.QUEUE),
        Resumable(funnel.STATE_FEED, funnel_sync_job, funnel.QUEUE),
        Resumable(inventory.STATE_FEED, inventory_sync_job, inventory.QUEUE),
        Resumable(catalog.CARDS_STATE_FEED, catalog_cards_job, catalog.QUEUE),
        Resumable(catalog.PRICES_STATE_FEED, catalog_prices_job, catalog.QUEUE),
        # A paused (or yielded) digitization load of either feed resumes as an increment.
        Resumable(digitization.ORDERS.name, digitization_increment_job, digitization.QUEUE),
        Resumable(digitization.SALES.name, digitization_increment_job, digitization.QUEUE),
    )
}


def plan_resumes(
    due: Mapping[tuple[str, str], datetime],
    active: Iterable[str],
    live_imports: set[str],
    busy: Mapping[str, set[str]],
) -> list[tuple[str, Resumable, datetime]]:
    """(cabinet, sync, resume_at) to launch: due pauses of active cabinets without a live user import
    whose sync's job has no run queued or running; one run per cabinet and job (one increment
    resumes both digitization feeds). Pure: unit-tested."""
    active_set = set(active)
    out = []
    launched: set[tuple[str, str]] = set()
    for (cabinet, feed), at in sorted(due.items()):
        sync = RESUMABLE.get(feed)
        if sync is None or cabinet not in active_set or cabinet in live_imports:
            continue
        if cabinet in busy.get(sync.job.name, set()) or (cabinet, sync.job.name) in launched:
            continue
        launched.add((cabinet, sync.job.name))
        out.append((cabinet, sync, at))
    return out


_RESUME = cadence("wb_sync_resume_sensor")


@sensor(
    name=_RESUME.name,
    jobs=list({r.job.name: r.job for r in RESUMABLE.values()}.values()),
    minimum_interval_seconds=_RESUME.interval_seconds or 30,
    default_status=sensor_status(_RESUME.name),
    description="Runs a digitization, finance, ads, funnel, stocks or catalog sync again for a cabinet once the "
    "pause WB imposed on it is over (the sync stored what it had and its resume time instead of waiting).",
)
def wb_sync_resume_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        active, live = active_cabinets(warehouse)
        with warehouse.connect() as conn:
            due = due_resumes_by_feed(conn, list(RESUMABLE), datetime.now(tz=MOSCOW))
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read sync_state: {exc.__class__.__name__}: {exc}")
    if not due:
        return SkipReason("no paused sync is due")
    busy = {
        job.name: busy_cabinets(context.instance, job.name)
        for job in {r.job.name: r.job for r in RESUMABLE.values()}.values()
    }
    launches = plan_resumes(due, active, live, busy)
    if not launches:
        return SkipReason(f"{len(due)} due, none launchable now (inactive, importing or already running)")
    return SensorResult(
        run_requests=[
            cabinet_request(
                sync.job,
                sync.queue,
                cabinet,
                f"resume:{sync.state_feed}:{cabinet}:{int(at.timestamp())}",
                f"resume {at.isoformat(timespec='seconds')}",
            )
            for cabinet, sync, at in launches
        ]
    )
