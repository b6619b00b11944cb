"""Re-aggregation of the РНП: the original's re-aggregate queue, RnpRecomputeService and rnp-merge-sync.

The sensor asks the watermarks which (cabinet, day) pairs of which РНП tables are due (their feeds
changed after their last recompute, or they were never recomputed: mart/plan.py, ``due_pairs``) and
requests those partitions of the matching rollups and of the merge ``rnp_daily``, batched into runs
by the Dagster-free planner (``plan_reaggregation``). The feeds' triggers keep the watermarks,
whoever writes, so the sensor needs no event to learn of a change, and a change no event named is
recomputed like any other. A recompute skips the requested pairs that are not due, so asking twice
costs nothing.

A failed read skips the tick: the pairs stay due, nothing is lost, and nothing the sensor does can
fail an import. The nightly rnp-merge-sync (orchestration/cadences.py calls ``merge_sync_requests``)
recomputes the last three days of every active cabinet whatever the watermarks say, heals any of the
last 90 days that has orders but no rnp_daily rows, and adds every due day, which also covers missed
ticks of its own schedule (Dagster schedules do not catch up, DESIGN.md §4.8); it also recomputes
rnp_finance of the days where the three days' report lines belong (their source orders' days).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta

import psycopg
from dagster import (
    AssetKey,
    DagsterError,
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
)
from sqlalchemy.exc import SQLAlchemyError

from optima_pipelines.assets.rnp import TAG_RECOMPUTE, TAG_SOURCE_EVENT_AT, rnp_recompute_job
from optima_pipelines.errors import InvalidInput, OptimaError
from optima_pipelines.mart.plan import (
    MERGE_WINDOW_DAYS,
    Recompute,
    parse_cursor,
    plan_merge_sync,
    plan_reaggregation,
    plan_recomputes,
)
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor, schedule_status
from optima_pipelines.orchestration.queues import (
    PRIORITY_REAGGREGATE,
    RE_AGGREGATE,
    RNP_MERGE_SYNC,
    TAG_TRIGGER,
    queue_tags,
)
from optima_pipelines.partitions import (
    CABINETS,
    CABINETS_NAME,
    RANGE_END_TAG,
    RANGE_START_TAG,
    cabinet_day_key,
)
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import MOSCOW, today_moscow
from optima_pipelines.warehouse.cabinets import list_cabinets

# --- the sensor --------------------------------------------------------------------------------


def run_request(recompute: Recompute, tags: Mapping[str, str], run_key: str) -> RunRequest:
    asset_selection = [AssetKey(k) for k in recompute.asset_keys]
    if recompute.partitions == 1:
        key = cabinet_day_key(recompute.cabinets[0], recompute.start)
        return RunRequest(run_key=run_key, asset_selection=asset_selection, partition_key=key, tags=dict(tags))
    range_tags = {
        RANGE_START_TAG: str(cabinet_day_key(recompute.cabinets[0], recompute.start)),
        RANGE_END_TAG: str(cabinet_day_key(recompute.cabinets[-1], recompute.end)),
    }
    return RunRequest(run_key=run_key, asset_selection=asset_selection, tags={**tags, **range_tags})


#: The sensor's runs not yet ended: while one is, what is due waits, and the tick after it ends
#: plans one run (or a few: mart.plan's size limits) over everything that came meanwhile. Sweeps
#: write their cabinets one after the other; planned as they come, a window of 1,000 cabinets was
#: three recompute runs a minute (bench/scale.py, issue 17). A user's import does not wait for this:
#: it recomputes its own days in its run (assets/rnp.py, ``recompute_in_run``).
IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]
#: The cursor's key for when the sensor last planned (epoch seconds): it plans at most every
#: OPTIMA_REAGGREGATE_EVERY_SECONDS, so that what a cadence window's sweeps write over a minute or
#: more is recomputed by a few runs, not by a run or two per tick.
PLANNED_AT = "planned_at"
#: How long the sensor's process keeps the cabinets' sizes it read (they change slowly).
SIZES_TTL_SECONDS = 600.0
_sizes: dict[tuple[str, str, date], tuple[float, dict[str, int]]] = {}


def cabinet_sizes(warehouse: Warehouse, cabinets: Sequence[str], day: date) -> dict[str, int]:
    """Each cabinet's rnp_daily rows on ``day`` (yesterday): the products a recompute of one of its
    days writes, which sizes the runs (mart.plan: a cabinet without rows counts as DEFAULT_PRODUCTS).
    One primary-key range count per cabinet; kept SIZES_TTL_SECONDS by the sensor's process."""
    key = (warehouse.database_url, warehouse.schema_name, day)
    now = time.monotonic()
    if key in _sizes and now - _sizes[key][0] < SIZES_TTL_SECONDS:
        return _sizes[key][1]
    with warehouse.connect() as conn:
        rows = conn.execute(
            "SELECT c.id, (SELECT count(*) FROM rnp_daily r WHERE r.cabinet_id = c.id AND r.day = %s)"
            " FROM unnest(%s::text[]) AS c (id)",
            (day, list(cabinets)),
        ).fetchall()
    sizes = {cabinet: int(n) for cabinet, n in rows if n}
    _sizes.clear()  # one deployment's, for one day: nothing else is kept
    _sizes[key] = (now, sizes)
    return sizes


# A tick reads the due watermarks by their partial index (bench/reaggregate_tick.py); a user's
# import does not wait for it (its run recomputes its days).
@cadence_sensor(
    cadence("rnp_reaggregate_sensor"),
    default_interval_seconds=15,
    job=rnp_recompute_job,
    description="Re-aggregation: asks the watermarks which (cabinet, day) pairs of the РНП are due (their feeds "
    "changed after their last recompute) and requests those partitions of the matching rollup and of rnp_daily, "
    "batched into runs over rectangles of cabinets × consecutive days, at the re-aggregate priority.",
)
def rnp_reaggregate_sensor(context: SensorEvaluationContext, warehouse: Warehouse) -> SensorResult | SkipReason:
    try:
        cursor = parse_cursor(context.cursor)
    except InvalidInput as exc:
        return SkipReason(str(exc))
    planned_at = cursor.get(PLANNED_AT, 0)
    wait = planned_at + load_settings().reaggregate_every_seconds - time.time()
    if wait > 0:
        return SkipReason(f"planned {time.time() - planned_at:.0f} s ago: what is due waits {wait:.0f} s more")
    try:
        pending = context.instance.get_runs_count(
            RunsFilter(job_name=rnp_recompute_job.name, statuses=IN_FLIGHT, tags={TAG_TRIGGER: "sensor"})
        )
        if pending:
            return SkipReason(f"{pending} re-aggregation run(s) of this sensor not ended yet: what is due waits")
        known = list(context.instance.get_dynamic_partitions(CABINETS_NAME))
    except (SQLAlchemyError, DagsterError, OSError) as exc:
        return SkipReason(f"could not read Dagster's storage: {exc.__class__.__name__}: {str(exc)[:300]}")
    today = today_moscow()
    first_day = date.fromisoformat(load_settings().partitions_start)
    try:
        sizes = cabinet_sizes(warehouse, known, today - timedelta(1))
    except (psycopg.Error, OptimaError) as exc:  # sized as unknown: smaller runs, nothing lost
        context.log.warning(f"could not read the cabinets' sizes: {exc.__class__.__name__}: {exc}")
        sizes = {}
    try:
        plan = plan_reaggregation(warehouse.connect, known, first_day, today, products=sizes)
    except (psycopg.Error, OptimaError) as exc:
        # A failed read is never "nothing due": the pairs stay due, the next tick reads again.
        return SkipReason(f"could not read the watermarks: {exc.__class__.__name__}: {str(exc)[:300]}")
    if not plan.recomputes:
        return SkipReason("no (cabinet, day) pair of the РНП is due")
    tags = {**queue_tags(RE_AGGREGATE, priority=PRIORITY_REAGGREGATE), TAG_TRIGGER: "sensor"}
    if plan.due.oldest is not None:
        tags[TAG_SOURCE_EVENT_AT] = plan.due.oldest.astimezone(UTC).isoformat()
    # The run keys name the watermarks' state: a tick evaluated again after a crash asks for the same
    # runs. A run that failed (after its retries) is not asked for again while that state holds: its
    # pairs stay due, and the next write that makes a pair due, or the nightly merge, recomputes them.
    requests = [run_request(r, tags, f"rnp:{plan.due.state}:{r.key}") for r in plan.recomputes]
    # A cabinet the cabinet sensor has not added yet gets its partitions now, so that the new
    # cabinet's РНП fills right after its first import.
    new_cabinets = plan.new_cabinets
    context.log.info(
        f"{len(plan.due.tables)} (cabinet, day) pairs due → {len(requests)} runs"
        + (f"; new cabinets {', '.join(new_cabinets)}" if new_cabinets else "")
    )
    return SensorResult(
        run_requests=requests,
        cursor=json.dumps({PLANNED_AT: int(time.time())}),
        dynamic_partitions_requests=[CABINETS.build_add_request(new_cabinets)] if new_cabinets else None,
    )


# --- rnp-merge-sync (the nightly merge) --------------------------------------------------------


def merge_sync_requests(context: ScheduleEvaluationContext, warehouse: Warehouse) -> list[RunRequest] | SkipReason:
    """The rnp-merge-sync tick (cron ``0 6 * * *`` Moscow, orchestration/cadences.py)."""
    when = context.scheduled_execution_time or datetime.now(MOSCOW)
    today = when.astimezone(MOSCOW).date()
    first_day = date.fromisoformat(load_settings().partitions_start)
    try:
        with warehouse.connect() as conn:
            active = [c.id for c in list_cabinets(conn, status="active")]
            known = list(context.instance.get_dynamic_partitions(CABINETS_NAME))
            # An active cabinet the cabinet sensor has not added yet has no partitions to request;
            # its first import fills its РНП through the sensor.
            cabinets = sorted(set(active) & set(known))
            plan = plan_merge_sync(conn, cabinets, today, first_day)
    except (OptimaError, psycopg.Error, SQLAlchemyError) as exc:
        return SkipReason(f"could not plan the nightly merge: {exc.__class__.__name__}: {str(exc)[:300]}")
    recomputes = plan_recomputes(plan.demands, known)
    context.log.info(
        f"{len(cabinets)} active cabinets × {MERGE_WINDOW_DAYS} days, {len(plan.healed)} days healed "
        f"({plan.healed[:5]}{'...' if len(plan.healed) > 5 else ''}), {len(plan.stale)} stale days "
        f"({plan.stale[:5]}{'...' if len(plan.stale) > 5 else ''}) → {len(recomputes)} runs"
    )
    if not recomputes:
        return SkipReason("no active cabinet with partitions")
    # The safety net: every pair of the window is recomputed, whatever its watermark says.
    tags = {
        **queue_tags(RNP_MERGE_SYNC, priority=PRIORITY_REAGGREGATE),
        TAG_TRIGGER: "schedule",
        TAG_RECOMPUTE: "all",
    }
    return [run_request(r, tags, f"merge:{today}:{r.key}") for r in recomputes]


_MERGE = cadence("rnp_merge_sync")


@schedule(
    name=_MERGE.name,
    cron_schedule=_MERGE.cadence,
    execution_timezone=_MERGE.timezone,
    job=rnp_recompute_job,
    default_status=schedule_status(_MERGE.name),
    description="rnp-merge-sync: every rollup and rnp_daily for the last 3 days of every active cabinet, plus "
    "self-healing: each of the last 90 days with orders but no rnp_daily rows, and every day whose "
    "watermark says stale.",
)
def rnp_merge_sync(context: ScheduleEvaluationContext, warehouse: Warehouse) -> list[RunRequest] | SkipReason:
    return merge_sync_requests(context, warehouse)
