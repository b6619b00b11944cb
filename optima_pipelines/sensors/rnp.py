"""Re-aggregation of the РНП: the original's re-aggregate queue, RnpRecomputeService and rnp-merge-sync.

The sensor reads new materializations of the WB feed assets from the event log, with one cursor
per feed (DESIGN.md §4.10: ``@asset_sensor`` only sees the latest event), and requests the
affected (cabinet, day) partitions of the matching rollup and of the merge ``rnp_daily``. Which days,
following DESIGN.md §2 and the event contract in docs/ARCHITECTURE.md:

| feed event | rollup | days recomputed |
|---|---|---|
| wb_orders / wb_sales, scheduled sync | rnp_sales | each materialized partition's day: the Moscow days of the orders and sales written |
| wb_orders with ``finance_days`` | rnp_finance | the partition's day and its ``finance_days``: report lines of these orders move from there to the orders' day |
| wb_orders / wb_sales, user import | rnp_sales | each materialized day: an import reports every day of [dateFrom, today] and every other day it touched |
| wb_report_lines, finance sync or report import | rnp_finance | the event's ``affected_days`` (the days of the lines' source orders) and the partition's own day |
| ad_campaign_stats | rnp_ads | each materialized day |
| rnp_funnel_stats, stocks | (merge only) | each materialized day |

The finance event's own day is recomputed too: a line whose source order arrived after it was
first loaded moves from its own day to the order's, and the day it left must lose it. The other way
round, an order that arrives after its report lines (or whose day changes) names in ``finance_days``
the days its lines leave: rnp_finance of those and of the order's day is recomputed.

Requests are batched without recomputing anything extra: per cabinet, each rollup's days become
ranges of consecutive days; cabinets with the same (range, rollups), adjacent in the dynamic
partition order, share one run over the rectangle cabinets × days (a partition range of the
cabinet × day partitions is exactly that rectangle). A 90-day import of one cabinet is one run;
a tick in which 50 cabinets synced today's orders is one run too.

A failed read skips the tick without moving the cursor, so nothing is lost; and nothing the sensor
does can fail an import (imports only log events). The nightly rnp-merge-sync (cadences.py calls
``merge_sync_requests``) recomputes the last three days of every active cabinet and heals any of
the last 90 days that has orders but no rnp_daily rows, which also covers missed ticks of its own
schedule (Dagster schedules do not catch up, DESIGN.md §4.8); it also recomputes rnp_finance of
the days where the three days' report lines belong (their source orders' days).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterError,
    DagsterInstance,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)
from sqlalchemy.exc import SQLAlchemyError

from optima_pipelines.assets.rnp import MART, ROLLUPS, TAG_SOURCE_EVENT_AT, rnp_recompute_job
from optima_pipelines.cabinets import list_cabinets
from optima_pipelines.cadences import cadence, schedule_status, sensor_status
from optima_pipelines.errors import InvalidInput, OptimaError
from optima_pipelines.jobs.partition_manager import covered_days, list_partitions
from optima_pipelines.partitions import (
    CABINETS,
    CABINETS_NAME,
    RANGE_END_TAG,
    RANGE_START_TAG,
    cabinet_day_key,
    parse_cabinet_day_key,
)
from optima_pipelines.queues import PRIORITY_REAGGREGATE, TAG_TRIGGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.changes import DayChange
from optima_pipelines.timeutil import MOSCOW, today_moscow

#: The feed assets (issues 4 and 5) and the rollup each one feeds; None: only the merge reads it.
FEED_ROLLUP: dict[str, str | None] = {
    "wb_orders": "rnp_sales",
    "wb_sales": "rnp_sales",
    "ad_campaign_stats": "rnp_ads",
    "wb_report_lines": "rnp_finance",
    "rnp_funnel_stats": None,
    "stocks": None,
}
#: Events read per feed per tick; the rest wait for the next tick (the cursor says where).
MAX_EVENTS_PER_FEED = 5000
#: Partitions (cabinet-days) per run. One cabinet × 90 days × 5,000 products (450,000 rows) takes
#: about 20 s on the 2-core test machine (bench/rnp_recompute.py); a bigger rectangle is split so
#: that one run stays bounded.
MAX_PARTITIONS_PER_RUN = 400
MERGE_WINDOW_DAYS = 3
HEAL_DAYS = 90


# --- events and days ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedEvent:
    """A materialization of one feed partition: "rows of this day changed"."""

    feed: str
    cabinet_id: str
    day: date
    affected_days: tuple[date, ...] = ()
    trigger: str | None = None
    #: wb_orders: days that report lines of these orders leave for the partition's day.
    finance_days: tuple[date, ...] = ()


def parse_feed_event(feed: str, partition: str | None, metadata: Mapping[str, Any]) -> FeedEvent:
    """A FeedEvent from a materialization; raises InvalidInput naming what is wrong."""
    if feed not in FEED_ROLLUP:
        raise InvalidInput(f"{feed!r} is not a feed of the РНП (expected one of {', '.join(FEED_ROLLUP)})")
    if not partition:
        raise InvalidInput(f"{feed} materialization has no partition: expected 'CABINET|YYYY-MM-DD'")
    cabinet_id, day = parse_cabinet_day_key(partition)
    change = DayChange.from_metadata(metadata)
    return FeedEvent(feed, cabinet_id, day, change.affected_days, change.trigger, change.finance_days)


def days_to_recompute(event: FeedEvent) -> frozenset[date]:
    """The Moscow days whose rollup this event makes stale: its own day and its affected_days."""
    return frozenset({event.day, *event.affected_days})


#: (cabinet, day) → rollups to recompute there (empty: the merge only). The merge always runs.
Demands = dict[tuple[str, date], set[str]]


@dataclass
class DayDemands:
    demands: Demands = field(default_factory=dict)
    #: (cabinet, day) pairs asked for but outside the Dagster partitions (before
    #: OPTIMA_PARTITIONS_START, or after today): there is no partition to request.
    out_of_range: list[tuple[str, date]] = field(default_factory=list)


def rollups_by_day(event: FeedEvent) -> dict[date, set[str]]:
    """The rollups this event makes stale, per Moscow day (an empty set: the merge only)."""
    rollup = FEED_ROLLUP[event.feed]
    out: dict[date, set[str]] = {day: {rollup} if rollup else set() for day in days_to_recompute(event)}
    if event.finance_days:  # report lines move from these days to the partition's (the orders') day
        for day in (event.day, *event.finance_days):
            out.setdefault(day, set()).add("rnp_finance")
    return out


def demands_from_events(events: Iterable[FeedEvent], first_day: date, last_day: date) -> DayDemands:
    result = DayDemands()
    for event in events:
        for day, rollups in rollups_by_day(event).items():
            if not first_day <= day <= last_day:
                result.out_of_range.append((event.cabinet_id, day))
                continue
            result.demands.setdefault((event.cabinet_id, day), set()).update(rollups)
    return result


# --- batching ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recompute:
    """One run: ``rollups`` then the merge, over the rectangle ``cabinets`` × [start, end]."""

    cabinets: tuple[str, ...]
    start: date
    end: date
    rollups: tuple[str, ...]

    @property
    def asset_keys(self) -> list[str]:
        return [*self.rollups, MART]

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def partitions(self) -> int:
        return len(self.cabinets) * self.days

    def pairs(self) -> list[tuple[str, date]]:
        return [(c, self.start + timedelta(n)) for c in self.cabinets for n in range(self.days)]

    @property
    def key(self) -> str:
        cabinets = self.cabinets[0] if len(self.cabinets) == 1 else f"{self.cabinets[0]}..{self.cabinets[-1]}"
        return f"{'+'.join(self.rollups) or 'merge'}:{cabinets}:{self.start}..{self.end}"


def day_ranges(days: Iterable[date]) -> list[tuple[date, date]]:
    """Maximal runs of consecutive days, in order."""
    ranges: list[tuple[date, date]] = []
    for day in sorted(set(days)):
        if ranges and day == ranges[-1][1] + timedelta(1):
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def _split(recompute: Recompute, max_partitions: int) -> list[Recompute]:
    out = []
    span = min(recompute.days, max_partitions)
    per_run = max(1, max_partitions // span)
    for first in range(0, recompute.days, span):
        start = recompute.start + timedelta(first)
        end = min(recompute.end, start + timedelta(span - 1))
        for i in range(0, len(recompute.cabinets), per_run):
            out.append(Recompute(recompute.cabinets[i : i + per_run], start, end, recompute.rollups))
    return out


def plan_recomputes(
    demands: Mapping[tuple[str, date], set[str]],
    cabinet_order: Sequence[str],
    *,
    max_partitions: int = MAX_PARTITIONS_PER_RUN,
) -> list[Recompute]:
    """The fewest runs this method finds that recompute exactly the demanded (rollup, cabinet, day)s.

    ``cabinet_order`` is the order of the dynamic cabinet partitions: a partition range covers the
    cabinets between its ends in that order, so only neighbours there can share a run. A cabinet not
    in it gets runs of its own.
    """
    # Per cabinet, each rollup's days as ranges; ranges shared by several rollups become one run.
    # "" stands for the merge alone.
    by_cabinet: dict[str, dict[str, set[date]]] = defaultdict(lambda: defaultdict(set))
    for (cabinet, day), wanted in demands.items():
        for rollup in wanted or {""}:
            by_cabinet[cabinet][rollup].add(day)
    signatures: dict[tuple[date, date, tuple[str, ...]], list[str]] = defaultdict(list)
    for cabinet, days_by_rollup in by_cabinet.items():
        spans: dict[tuple[date, date], set[str]] = defaultdict(set)
        for rollup, days in days_by_rollup.items():
            for span in day_ranges(days):
                spans[span].add(rollup)
        for (start, end), names in spans.items():
            signatures[(start, end, tuple(r for r in ROLLUPS if r in names))].append(cabinet)

    position = {c: i for i, c in enumerate(cabinet_order)}
    plan: list[Recompute] = []
    for (start, end, rollups), cabinets in signatures.items():
        known = sorted((c for c in cabinets if c in position), key=position.__getitem__)
        groups: list[list[str]] = []
        for cabinet in known:
            if groups and position[cabinet] == position[groups[-1][-1]] + 1:
                groups[-1].append(cabinet)
            else:
                groups.append([cabinet])
        groups.extend([c] for c in sorted(c for c in cabinets if c not in position))
        for group in groups:
            plan.extend(_split(Recompute(tuple(group), start, end, rollups), max_partitions))
    return sorted(plan, key=lambda r: (r.start, r.cabinets, r.rollups))


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


# --- the sensor --------------------------------------------------------------------------------


def parse_cursor(cursor: str | None) -> dict[str, int]:
    """The sensor cursor: the last storage id read, per feed."""
    if not cursor:
        return {}
    try:
        raw = json.loads(cursor)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in raw.items()):
        raise InvalidInput(
            f"cursor {cursor[:80]!r} is not a JSON object of feed → storage id; "
            "clear it in the UI to read the feeds' events from the beginning"
        )
    return raw


@dataclass
class FeedRead:
    events: list[FeedEvent] = field(default_factory=list)
    cursor: dict[str, int] = field(default_factory=dict)
    #: Events that cannot be used, with why. Skipped (and logged), never retried forever.
    rejected: list[str] = field(default_factory=list)
    read: int = 0
    #: When the oldest change read was stored (epoch seconds): the runs' lag is measured from it.
    oldest_at: float | None = None


def read_feed_events(instance: DagsterInstance, cursor: Mapping[str, int]) -> FeedRead:
    """New materializations of every feed after the cursor, oldest first."""
    out = FeedRead(cursor=dict(cursor))
    for feed in FEED_ROLLUP:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(feed), after_storage_id=cursor.get(feed)),
            limit=MAX_EVENTS_PER_FEED,
            ascending=True,
        ).records
        for record in records:
            out.read += 1
            out.cursor[feed] = record.storage_id
            out.oldest_at = record.timestamp if out.oldest_at is None else min(out.oldest_at, record.timestamp)
            mat = record.asset_materialization
            if mat is None:
                continue
            try:
                out.events.append(parse_feed_event(feed, mat.partition, mat.metadata))
            except InvalidInput as exc:
                out.rejected.append(f"{feed} event {record.storage_id} (partition {mat.partition!r}): {exc}")
    return out


def _tick_id(cursor: Mapping[str, int]) -> str:
    # Run keys must differ between ticks (a sensor's run_key dedup is permanent, DESIGN.md §4.9)
    # yet repeat when a tick is re-evaluated after a crash: the cursor the tick moves to is both.
    return hashlib.sha1(json.dumps(cursor, sort_keys=True).encode()).hexdigest()[:12]


@sensor(
    name="rnp_reaggregate_sensor",
    job=rnp_recompute_job,
    minimum_interval_seconds=15,
    default_status=sensor_status("rnp_reaggregate_sensor"),
    description="Re-aggregation: reads new materializations of the WB feeds from the event log and requests "
    "the affected (cabinet, day) partitions of the matching РНП rollup and of rnp_daily, batched into "
    "runs over rectangles of cabinets × consecutive days, at the re-aggregate priority.",
)
def rnp_reaggregate_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    try:
        cursor = parse_cursor(context.cursor)
    except InvalidInput as exc:
        return SkipReason(str(exc))
    try:
        read = read_feed_events(context.instance, cursor)
        known = list(context.instance.get_dynamic_partitions(CABINETS_NAME))
    except (SQLAlchemyError, DagsterError, OSError) as exc:
        # A failed read is never "no changes": the cursor stays, the next tick reads again.
        return SkipReason(f"could not read the event log: {exc.__class__.__name__}: {str(exc)[:300]}")
    for message in read.rejected:
        context.log.warning(f"skipped {message}")
    if not read.read:
        return SkipReason("no new feed materializations")

    first_day = date.fromisoformat(load_settings().partitions_start)
    wanted = demands_from_events(read.events, first_day, today_moscow())
    if wanted.out_of_range:
        context.log.warning(
            f"{len(wanted.out_of_range)} (cabinet, day) pairs are outside the partitions "
            f"[{first_day}, today] and were not requested, e.g. {wanted.out_of_range[:3]}"
        )
    # A feed partition of a cabinet the cabinet sensor has not added yet: add it now, so that the
    # new cabinet's РНП fills right after its first import.
    new_cabinets = sorted({c for c, _ in wanted.demands} - set(known))
    plan = plan_recomputes(wanted.demands, known)
    tick = _tick_id(read.cursor)
    tags = {**queue_tags("re-aggregate", priority=PRIORITY_REAGGREGATE), TAG_TRIGGER: "sensor"}
    if read.oldest_at is not None:
        tags[TAG_SOURCE_EVENT_AT] = datetime.fromtimestamp(read.oldest_at, UTC).isoformat()
    requests = [run_request(r, tags, f"rnp:{tick}:{r.key}") for r in plan]
    context.log.info(
        f"{read.read} feed events → {len(wanted.demands)} (cabinet, day) partitions → {len(requests)} runs"
        + (f"; new cabinets {', '.join(new_cabinets)}" if new_cabinets else "")
    )
    return SensorResult(
        run_requests=requests,
        cursor=json.dumps(read.cursor, sort_keys=True),
        dynamic_partitions_requests=[CABINETS.build_add_request(new_cabinets)] if new_cabinets else None,
        skip_reason=None if requests else "the new feed events name no partition to recompute",
    )


# --- rnp-merge-sync (the nightly merge) --------------------------------------------------------


def days_to_heal(conn: psycopg.Connection, cabinets: Sequence[str], first: date, last: date) -> list[tuple[str, date]]:
    """(cabinet, day) pairs in [first, last] with orders but no rnp_daily rows, index probes only."""
    rows = conn.execute(
        """
        SELECT c.cabinet_id, d.day::date
        FROM unnest(%(cabinets)s::text[]) AS c (cabinet_id)
        CROSS JOIN generate_series(%(first)s::date, %(last)s::date, interval '1 day') AS d (day)
        WHERE EXISTS (SELECT 1 FROM wb_orders o WHERE o.cabinet_id = c.cabinet_id AND o.day = d.day::date)
          AND NOT EXISTS (SELECT 1 FROM rnp_daily r WHERE r.cabinet_id = c.cabinet_id AND r.day = d.day::date)
        ORDER BY 1, 2
        """,
        {"cabinets": list(cabinets), "first": first, "last": last},
    ).fetchall()
    return [(c, d) for c, d in rows]


def source_order_days(
    conn: psycopg.Connection, cabinets: Sequence[str], first: date, last: date
) -> list[tuple[str, date]]:
    """(cabinet, day) of the source orders of the report lines of [first, last] (their own day) that
    belong to another day: where those lines are placed (index probes by srid)."""
    rows = conn.execute(
        """
        SELECT DISTINCT l.cabinet_id, o.day
        FROM wb_report_lines l
        JOIN wb_orders o ON o.cabinet_id = l.cabinet_id AND o.srid = l.srid
        WHERE l.cabinet_id = ANY(%(cabinets)s) AND l.day BETWEEN %(first)s AND %(last)s AND o.day <> l.day
        ORDER BY 1, 2
        """,
        {"cabinets": list(cabinets), "first": first, "last": last},
    ).fetchall()
    return [(c, d) for c, d in rows]


@dataclass
class MergeSyncPlan:
    demands: Demands
    healed: list[tuple[str, date]]


def plan_merge_sync(conn: psycopg.Connection, cabinets: Sequence[str], today: date, first_day: date) -> MergeSyncPlan:
    """Every rollup and the merge for the last MERGE_WINDOW_DAYS days of each cabinet, plus the
    days of the last HEAL_DAYS with orders and no rnp_daily rows, plus the finance rollup of the
    days where report lines of the window belong (their source orders' days): a line whose order
    arrived after it leaves its own day and reaches its order's even if the sensor missed the
    order's event. Days without a table partition are left out: their rows are dropped by design,
    and would be "healed" every night."""
    window = [today - timedelta(n) for n in range(MERGE_WINDOW_DAYS)]
    heal_from = max(first_day, today - timedelta(HEAL_DAYS - 1))
    candidates = days_to_heal(conn, cabinets, heal_from, today) if cabinets else []
    placed = source_order_days(conn, cabinets, window[-1], today) if cabinets else []
    partitions = list_partitions(conn, MART)

    def covered(pairs: list[tuple[str, date]]) -> list[tuple[str, date]]:
        ok = covered_days(partitions, [d for _, d in pairs])
        return [p for p, keep in zip(pairs, ok, strict=True) if keep and p[1] >= first_day]

    healed = covered(candidates)
    demands: Demands = {}
    for pair in covered(placed):
        demands[pair] = {"rnp_finance"}
    for pair in [(c, d) for c in cabinets for d in window if d >= first_day] + healed:
        demands[pair] = set(ROLLUPS)
    return MergeSyncPlan(demands, healed)


def merge_sync_requests(context: ScheduleEvaluationContext, warehouse: Warehouse) -> list[RunRequest] | SkipReason:
    """The rnp-merge-sync tick (cron ``0 6 * * *`` Moscow, cadences.py)."""
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
        f"({plan.healed[:5]}{'...' if len(plan.healed) > 5 else ''}) → {len(recomputes)} runs"
    )
    if not recomputes:
        return SkipReason("no active cabinet with partitions")
    tags = {**queue_tags("rnp-merge-sync", priority=PRIORITY_REAGGREGATE), TAG_TRIGGER: "schedule"}
    return [run_request(r, tags, f"merge:{today}:{r.key}") for r in recomputes]


_MERGE = cadence("rnp_merge_sync")


@schedule(
    name=_MERGE.name,
    cron_schedule=_MERGE.cadence,
    execution_timezone=_MERGE.timezone,
    job=rnp_recompute_job,
    default_status=schedule_status(_MERGE.name),
    description="rnp-merge-sync: every rollup and rnp_daily for the last 3 days of every active cabinet, plus "
    "self-healing: each of the last 90 days with orders but no rnp_daily rows.",
)
def rnp_merge_sync(context: ScheduleEvaluationContext, warehouse: Warehouse) -> list[RunRequest] | SkipReason:
    return merge_sync_requests(context, warehouse)
