"""Cadences of the WB syncs (digitization, finance, ads, funnel, catalog, inventory): the fan-out every
schedule and interval sensor of theirs shares, and the sensor that resumes a sync WB paused.

- **Sweeps** (``orchestration/fanout.py``'s rules): every active cabinet without a live user import,
  without a run of the same sync queued or running (single-cabinet or sweep), and not held in a WB
  pause, is swept once per cadence window: one run (jobs/wb_sync.py's ``sweep_job``) per shard of
  OPTIMA_SWEEP_SHARD_SIZE cabinets. The run key is the job, the window (an interval sensor's window
  number, a schedule's intended tick time) and the shard, so a tick evaluated twice launches
  nothing twice; an interval sensor's cursor keeps the window's swept cabinets, so a cabinet that
  becomes due later in the window (no longer busy, new) is swept by a second run, once.
- **Catch-up of the cron cadences**: a schedule ticks once (the nightly backfill, finance, cards,
  the hourly stocks), so a cabinet its tick left out (another run held it, a user's import ran,
  WB paused it) or that its sweep skipped as account-busy would wait a day. As in the original,
  where such a job waited out the cadence's window (backfill 3 h, finance 6 h) before it gave up,
  ``cron_sweep_catchup_sensor`` sweeps those cabinets once they are free, until the window ends:
  more sweep runs of the same window (``optima/window``), after the schedule's own tick.
- **Resume**: a sync that WB's rate limit would have made wait (ADR-0051) stored what it had and
  its ``resume_at`` in sync_state; ``wb_sync_resume_sensor`` launches that sync's job again once the
  time has come, one run per pause (the run key holds its resume time).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    JobDefinition,
    RunRequest,
    RunsFilter,
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
from optima_pipelines.orchestration.cadences import (
    cadence,
    cadence_sensor,
    schedule_status,
    sensor_status,
    sweep_priority,
    tick_seconds,
)
from optima_pipelines.orchestration.dagster_internals import latest_cron_tick, schedule_tick_evaluated
from optima_pipelines.orchestration.fanout import IN_FLIGHT, FanoutPlan, active_cabinets, busy_cabinets, plan_fanout
from optima_pipelines.orchestration.queues import (
    PRIORITY_SCHEDULED,
    TAG_CABINET,
    TAG_TRIGGER,
    TAG_WINDOW,
    queue_tags,
    sweep_tags,
)
from optima_pipelines.orchestration.runconfig import cabinet_run_config, op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.sync import ads, catalog, digitization, finance, funnel, inventory
from optima_pipelines.sync.runs import due_resumes_by_feed, paused_cabinets
from optima_pipelines.timeutil import MOSCOW

AnyJob = JobDefinition


def cabinet_request(job: AnyJob, queue: str, cabinet_id: str, run_key: str, window: str) -> RunRequest:
    """A scheduled single-cabinet run (a resume): the cabinet gate's tag, the scheduled priority."""
    return RunRequest(
        run_key=run_key,
        job_name=job.name,
        run_config=cabinet_run_config(job.name, cabinet_id),
        tags={
            **queue_tags(queue, cabinet_id=cabinet_id, priority=PRIORITY_SCHEDULED),
            TAG_TRIGGER: "schedule",
            TAG_WINDOW: window,
        },
    )


@dataclass(frozen=True)
class Sweep:
    """A scheduled cadence's jobs: the sweep it launches, and the single-cabinet job of the same sync
    (whose runs in flight hold their cabinet out of the sweep)."""

    job: JobDefinition
    cabinet_job: JobDefinition
    queue: str


def sweep_requests(
    sweep: Sweep, cadence_name: str, cabinets: Sequence[str], window: str, first: int = 0
) -> list[RunRequest]:
    """The window's sweep runs over ``cabinets``: shards of at most OPTIMA_SWEEP_SHARD_SIZE, run keys
    ``<job>:<window>:<shard>`` numbered from ``first`` (a second batch in the same window goes on)."""
    size = load_settings().sweep_shard_size
    shards = [list(cabinets[i : i + size]) for i in range(0, len(cabinets), size)]
    return [
        RunRequest(
            run_key=f"{sweep.job.name}:{window}:{first + k}",
            job_name=sweep.job.name,
            run_config={"ops": {op_name(sweep.job.name): {"config": {"cabinet_ids": shard, "window": window}}}},
            tags=sweep_tags(
                sweep.queue,
                cadence=cadence_name,
                window=window,
                shard=f"{first + k + 1}" if first else f"{k + 1}/{len(shards)}",
                cabinets=len(shard),
                priority=sweep_priority(cadence_name),
            ),
        )
        for k, shard in enumerate(shards)
    ]


def swept_cabinets(
    instance: DagsterInstance, warehouse: Warehouse, job_name: str, items: str = "cabinet_ids"
) -> set[str]:
    """Cabinets of this sweep job's runs queued or running whose work in them is not over: its run
    config's ``items`` name them (a cabinet id, or a key that starts ``<cabinet>|``, as the
    repricer's slots do), and a cabinet with as many final outcomes in ``sweep_outcomes`` as it has
    items there is done (a sweep that waits out one cabinet's WB pause does not hold the others
    back from the next window). Outcomes are written every few seconds (jobs/wb_sync.EMIT_EVERY):
    a cabinet that has just finished may count as busy for that long. Raises psycopg.Error on a
    failed read."""
    pending: dict[str, Counter[str]] = {}
    for run in instance.get_runs(RunsFilter(job_name=job_name, statuses=IN_FLIGHT)):
        run_config: dict[str, Any] = dict(run.run_config or {})
        config = run_config.get("ops", {}).get(op_name(job_name), {}).get("config", {})
        pending[run.run_id] = Counter(str(item).split("|", 1)[0] for item in config.get(items) or [])
    if pending:
        with warehouse.connect() as conn:
            rows = conn.execute(
                "SELECT run_id, cabinet_id, count(*) FROM sweep_outcomes WHERE run_id = ANY(%s) GROUP BY 1, 2",
                (list(pending),),
            ).fetchall()
        for run_id, cabinet, done in rows:
            pending[run_id][cabinet] -= done
    return {cabinet for counts in pending.values() for cabinet, left in counts.items() if left > 0}


#: The sync_state feed(s) whose WB pause holds a cabinet's runs of a cadence back (none: never held).
StateFeeds = str | Sequence[str]


def plan(
    warehouse: Warehouse,
    context: SensorEvaluationContext | ScheduleEvaluationContext,
    sweep: Sweep,
    state_feed: StateFeeds,
) -> FanoutPlan:
    """Which cabinets the window's sweep covers now (raises psycopg.Error / OptimaError on a failed read)."""
    active, live = active_cabinets(warehouse)
    feeds = [state_feed] if isinstance(state_feed, str) else list(state_feed)
    paused: set[str] = set()
    if feeds:
        with warehouse.connect() as conn:
            paused = paused_cabinets(conn, feeds, datetime.now(tz=MOSCOW))
    return plan_fanout(active, live, sweep_busy(context.instance, warehouse, sweep), paused)


def window_cursor(raw: str | None, window: int) -> tuple[set[str], int]:
    """(cabinets already launched in ``window``, sweep runs requested in it) from the sensor's cursor;
    a cursor of another window (or none, or unreadable) starts the window afresh."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict) or data.get("window") != window:
        return set(), 0
    return set(data.get("launched") or []), int(data.get("runs") or 0)


def window_sweep(
    context: SensorEvaluationContext, sweep: Sweep, cadence_name: str, window: int, fanout: FanoutPlan
) -> SensorResult | SkipReason:
    """The sweep runs of an interval cadence's tick: the cabinets of ``fanout.launch`` not swept yet
    in ``window`` (the sensor's cursor keeps them), sharded; a later tick sweeps what became due."""
    launched, runs = window_cursor(context.cursor, window)
    due = [c for c in fanout.launch if c not in launched]
    if fanout.skipped:
        context.log.info(f"window {window} skipped: {fanout.skipped}")
    if not due:
        return SkipReason(f"window {window}: nothing to launch ({len(launched)} swept, {len(fanout.skipped)} skipped)")
    requests = sweep_requests(sweep, cadence_name, due, str(window), first=runs)
    cursor = json.dumps({"window": window, "launched": sorted(launched | set(due)), "runs": runs + len(requests)})
    return SensorResult(run_requests=requests, cursor=cursor)


def sweep_busy(instance: DagsterInstance, warehouse: Warehouse, sweep: Sweep) -> set[str]:
    """Cabinets with a run of the sweep's sync queued or running, alone or in a sweep not done with them."""
    return busy_cabinets(instance, sweep.cabinet_job.name) | swept_cabinets(instance, warehouse, sweep.job.name)


def interval_fanout_sensor(name: str, sweep: Sweep, state_feed: StateFeeds, description: str) -> SensorDefinition:
    """An interval cadence from the registry: one sweep per window of ``interval_seconds`` over every
    due cabinet (sharded). A later tick of the same window sweeps only the cabinets that became due
    since (were busy, paused or new); the cursor keeps the window's launched cabinets."""
    entry = cadence(name)
    interval = entry.interval_seconds or 300

    @sensor(
        name=entry.name,
        job=sweep.job,
        minimum_interval_seconds=tick_seconds(interval),
        default_status=sensor_status(entry.name),
        description=f"{description} ({entry.cadence}: a sweep over the active cabinets).",
    )
    def _sensor(context: SensorEvaluationContext, warehouse: Warehouse):
        window = int(time.time() // interval)
        try:
            fanout = plan(warehouse, context, sweep, state_feed)
        except (psycopg.Error, OptimaError) as exc:
            return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
        return window_sweep(context, sweep, entry.name, window, fanout)

    return _sensor


#: The cron cadences' sweeps by schedule name (cron_fanout_schedule enters each): what the catch-up
#: sensor sweeps again.
CRON_SWEEPS: dict[str, tuple[Sweep, StateFeeds]] = {}


def tick_window(tick: datetime) -> str:
    """A cron tick's window as its sweeps' run keys and ``optima/window`` tag name it (Moscow time)."""
    return tick.astimezone(MOSCOW).strftime("%Y-%m-%dT%H:%M")


def cron_fanout_schedule(name: str, sweep: Sweep, state_feed: StateFeeds, description: str) -> ScheduleDefinition:
    """A cron cadence from the registry: one sweep per tick over every due cabinet (sharded); the
    catch-up sensor sweeps the cabinets it left out once they are due, within the cadence's window."""
    entry = cadence(name)
    CRON_SWEEPS[name] = (sweep, state_feed)

    @schedule(
        name=entry.name,
        job=sweep.job,
        cron_schedule=entry.cadence,
        execution_timezone=entry.timezone,
        default_status=schedule_status(entry.name),
        description=f"{description} (cron {entry.cadence}, {entry.timezone}: a sweep over the active cabinets).",
    )
    def _schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
        tick = tick_window(context.scheduled_execution_time)
        try:
            fanout = plan(warehouse, context, sweep, state_feed)
        except (psycopg.Error, OptimaError) as exc:
            return SkipReason(f"could not read cabinets: {exc.__class__.__name__}: {exc}")
        if not fanout.launch:
            return SkipReason(f"{tick}: nothing to launch; skipped {fanout.skipped}")
        return sweep_requests(sweep, entry.name, fanout.launch, tick)

    return _schedule


#: How long the catch-up lets a cron window's latest sweep run alone before it launches another: a
#: cabinet held all the while by work the fan-out does not see (another sync's run) is tried at most
#: every CATCHUP_PAUSE, not every tick (a few runs a window, where the original retried every 15 s).
CATCHUP_PAUSE = timedelta(minutes=5)


@dataclass(frozen=True)
class WindowState:
    #: The cabinets the window needs no more (window_done).
    done: set[str]
    #: Its sweep runs so far, and when the latest was created (None: none yet).
    runs: int
    latest: datetime | None


def window_done(
    instance: DagsterInstance, warehouse: Warehouse, sweep: Sweep, window: str, since: datetime
) -> WindowState:
    """What a cron window has done: a cabinet is done when one of the window's sweep runs came to
    a final outcome for it other than skipped (failed, deferred and retrying included: the
    failure's record and the resume sensor take it from there), or when a single-cabinet run of
    the same sync (a resume, a person's) succeeded since the tick. A cabinet a sweep run still works
    on is busy, which the fan-out's plan skips. Raises psycopg.Error on a failed read."""
    records = instance.get_run_records(RunsFilter(job_name=sweep.job.name, tags={TAG_WINDOW: window}))
    done: set[str] = set()
    if records:
        with warehouse.connect() as conn:
            rows = conn.execute(
                "SELECT DISTINCT cabinet_id FROM sweep_outcomes WHERE run_id = ANY(%s) AND outcome <> 'skipped'",
                ([r.dagster_run.run_id for r in records],),
            ).fetchall()
        done = {cabinet for (cabinet,) in rows}
    # In UTC: Dagster's run storage compares created_after with its stored UTC times, tzinfo dropped.
    alone = instance.get_runs(
        RunsFilter(
            job_name=sweep.cabinet_job.name, statuses=[DagsterRunStatus.SUCCESS], created_after=since.astimezone(UTC)
        )
    )
    return WindowState(
        done | {r.tags[TAG_CABINET] for r in alone if TAG_CABINET in r.tags},
        len(records),
        max((r.create_timestamp for r in records), default=None),
    )


def cron_catchup_sensor(schedules: Sequence[ScheduleDefinition]) -> SensorDefinition:
    """The catch-up of these cron cadences (each made by cron_fanout_schedule): while a tick's
    window lasts (the cadence's ``window_seconds``) and once the daemon has evaluated that tick, a
    sweep over the active cabinets that are due now (not busy, importing or paused) and that the
    window has not done yet (window_done), in the window's own run keys and tag, at most every
    CATCHUP_PAUSE."""
    entry = cadence("cron_sweep_catchup_sensor")
    sweeps = {s.name: CRON_SWEEPS[s.name] for s in schedules}

    @cadence_sensor(
        entry,
        default_interval_seconds=60,
        jobs=[sweep.job for sweep, _ in sweeps.values()],
        description="Sweeps again, within their cadence's window, the cabinets a nightly or hourly schedule's tick "
        "left out (busy, importing, paused) or its sweep skipped as account-busy: " + ", ".join(sorted(sweeps)) + ".",
    )
    def _sensor(context: SensorEvaluationContext, warehouse: Warehouse):
        now = datetime.now(UTC)
        requests: list[RunRequest] = []
        notes: list[str] = []
        for name, (sweep, state_feed) in sweeps.items():
            cron = cadence(name)
            tick = latest_cron_tick(cron.cadence, now, cron.timezone)
            if now >= tick + timedelta(seconds=cron.window_seconds or 0):
                continue
            window = tick_window(tick)
            if not schedule_tick_evaluated(context.instance, name, tick):
                notes.append(f"{name} {window}: not evaluated (yet), or stopped")
                continue
            try:
                state = window_done(context.instance, warehouse, sweep, window, tick)
                if state.latest is not None and now - state.latest < CATCHUP_PAUSE:
                    notes.append(f"{name} {window}: its latest sweep run is less than {CATCHUP_PAUSE} old")
                    continue
                fanout = plan(warehouse, context, sweep, state_feed)
            except (psycopg.Error, OptimaError) as exc:
                notes.append(f"{name} {window}: could not read: {exc.__class__.__name__}: {exc}")
                continue
            due = [c for c in fanout.launch if c not in state.done]
            notes.append(f"{name} {window}: {len(state.done)} done, {len(due)} to catch up")
            if due:
                context.log.info(f"{name} {window}: sweeping {len(due)} cabinets its tick left out: {', '.join(due)}")
                requests += sweep_requests(sweep, name, due, window, first=state.runs)
        if not requests:
            return SkipReason("; ".join(notes) or "no cron cadence is within its window")
        return SensorResult(run_requests=requests)

    return _sensor


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


@cadence_sensor(
    _RESUME,
    default_interval_seconds=30,
    jobs=list({r.job.name: r.job for r in RESUMABLE.values()}.values()),
    description="Runs a digitization, finance, ads, funnel, stocks or catalog sync again for a cabinet once the "
    "pause WB imposed on it is over (the sync stored what it had and its resume time instead of waiting).",
)
def wb_sync_resume_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        active, live = active_cabinets(warehouse)
        with warehouse.connect() as conn:
            due = due_resumes_by_feed(conn, list(RESUMABLE), datetime.now(tz=MOSCOW))
        if not due:
            return SkipReason("no paused sync is due")
        # A sweep of the same sync not done with a cabinet holds it: it resumes a short pause itself.
        busy = {
            job.name: busy_cabinets(context.instance, job.name)
            | swept_cabinets(context.instance, warehouse, f"{job.name}_sweep")
            for job in {r.job.name: r.job for r in RESUMABLE.values()}.values()
        }
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read sync_state: {exc.__class__.__name__}: {exc}")
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
