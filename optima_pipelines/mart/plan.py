"""The re-aggregation planner: which (cabinet, day) partitions of which РНП tables are due, and how
they are batched into runs. Free of Dagster (a test holds it to that): sensors/rnp.py turns these
plans into RunRequests; the nightly merge's plan is built here from what it reads in the warehouse
(``plan_merge_sync``, ``sql/days_to_heal.sql``).

**What is due is what the watermarks say** (``rnp_watermarks``, migrations 0012, 0015 and 0021): the
feeds' triggers count every write, whoever writes (a load, a user's report file, a replay, a person in
psql), on the (cabinet, day) of each РНП table it changes, and a recompute records the count it saw.
A pair whose feeds changed after its last recompute, or that was never recomputed, is due
(``due_pairs``), whatever any materialization said. That is the one change record the planner reads:

| feed written | РНП tables due |
|---|---|
| wb_orders (a new, changed or deleted order) | rnp_sales and rnp_daily of its day (both days when WB re-dated it); the report lines it re-places count on theirs |
| wb_sales | rnp_sales, rnp_daily of its day |
| wb_report_lines | rnp_finance, rnp_daily of the day the line is placed on (its source order's day, else its own), before and after |
| ad_campaign_stats | rnp_ads, rnp_daily |
| rnp_funnel_stats, stocks | rnp_daily (the merge only) |

The feeds' materializations (``changes.FeedChange``) stay what the UI shows of a load; the planner
does not read them.

Requests are batched: per cabinet, each rollup's days become ranges of consecutive days; cabinets
with the same (range, rollups), adjacent in the dynamic partition order, share one run over the
rectangle cabinets × days (a partition range of the cabinet × day partitions is exactly that
rectangle), sized by the cabinets' products. A 90-day import of one cabinet is one run. The
sensor's plans are first widened (``widen``): a recompute skips the pairs whose feeds did not
change, so the few days and rollups a window's syncs touched, which differ from cabinet to cabinet,
become one span and one set of rollups, and a window of 1,000 cabinets is one run, not fifteen.
The nightly merge's forced recompute is planned exactly.

No due day is left: the sensor plans every due pair of the partitions at each tick, whatever its
age, and the nightly merge adds them to its window too.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import psycopg

from optima_pipelines.db.connection import Connect
from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.errors import InvalidInput
from optima_pipelines.warehouse.table_partitions import covered_days, list_partitions

ROLLUPS = ("rnp_sales", "rnp_ads", "rnp_finance")
MART = "rnp_daily"

#: The feed assets (issues 4 and 5) and the rollup each one feeds; None: only the merge reads it.
FEED_ROLLUP: dict[str, str | None] = {
    "wb_orders": "rnp_sales",
    "wb_sales": "rnp_sales",
    "ad_campaign_stats": "rnp_ads",
    "wb_report_lines": "rnp_finance",
    "rnp_funnel_stats": None,
    "stocks": None,
}
#: What one run may recompute, in product-days (a cabinet's products × the days asked): 400 days of
#: a cabinet of 5,000 products. One cabinet × 90 days × 5,000 products (450,000 rows) takes about
#: 20 s to fill on the 2-core test machine (bench/rnp_recompute.py); a bigger rectangle is split so
#: that one run stays bounded. A cabinet whose size is not known counts as DEFAULT_PRODUCTS.
DEFAULT_PRODUCTS = 5000
MAX_PRODUCT_DAYS_PER_RUN = 400 * DEFAULT_PRODUCTS
#: And at most this many partitions (cabinet-days) a run, however small the cabinets: a sweep of
#: 1,000 cabinets of ten products changes 3,000 partitions in one window, one run.
MAX_PARTITIONS_PER_RUN = 5000
MERGE_WINDOW_DAYS = 3
HEAL_DAYS = 90

#: The text of ``mart/sql/<name>.sql``.
statement = SqlFiles(__file__)


#: (cabinet, day) → rollups to recompute there (empty: the merge only). The merge always runs.
Demands = dict[tuple[str, date], set[str]]


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


def _split(
    recompute: Recompute, max_partitions: int, max_product_days: int, products: Mapping[str, int]
) -> list[Recompute]:
    """``recompute`` in runs of at most ``max_partitions`` partitions and ``max_product_days``
    product-days each (cabinets keep their order; days are split only when one cabinet is too big)."""

    def size(cabinet: str) -> int:
        return max(1, products.get(cabinet, DEFAULT_PRODUCTS))

    heaviest = max(size(c) for c in recompute.cabinets)
    span = max(1, min(recompute.days, max_partitions, max_product_days // heaviest))
    out = []
    for first in range(0, recompute.days, span):
        start = recompute.start + timedelta(first)
        end = min(recompute.end, start + timedelta(span - 1))
        days = (end - start).days + 1
        group: list[str] = []
        load = 0
        for cabinet in recompute.cabinets:
            weight = size(cabinet) * days
            if group and (load + weight > max_product_days or (len(group) + 1) * days > max_partitions):
                out.append(Recompute(tuple(group), start, end, recompute.rollups))
                group, load = [], 0
            group.append(cabinet)
            load += weight
        out.append(Recompute(tuple(group), start, end, recompute.rollups))
    return out


#: A cabinet's demanded days within this many days of each other are widened to one span (``widen``).
WIDEN_WITHIN_DAYS = 7


def widen(demands: Mapping[tuple[str, date], set[str]], cabinet_order: Sequence[str]) -> Demands:
    """The demands of a watermark-guarded recompute (the sensor's) made into few rectangles.

    A window's syncs leave each cabinet a different mix (ads on three days, today's orders, a
    stock snapshot...), and cabinets without changes between them: planned exactly, a tick of 1,000
    cabinets was fifteen runs (bench/scale.py). A recompute skips every pair whose feeds did not
    change (rnp_watermarks), so asking for more costs a watermark read, not a recompute. Here each
    cabinet whose demanded days lie within WIDEN_WITHIN_DAYS gets every day of that span (of the
    union of those spans, when it is that short too: one ads sync touched today, another increment
    the last four days); the
    cabinets of one span get every rollup any of them asked for; and the cabinets between them in
    ``cabinet_order`` join with the same span and rollups. Cabinets asking for longer ranges (an
    import of 90 days) keep their exact demands. Never use it for a forced recompute (the nightly
    merge's): there every pair asked for is recomputed."""
    days_of: dict[str, set[date]] = defaultdict(set)
    rollups_of: dict[str, set[str]] = defaultdict(set)
    for (cabinet, day), wanted in demands.items():
        days_of[cabinet].add(day)
        rollups_of[cabinet] |= wanted
    out: Demands = {pair: set(wanted) for pair, wanted in demands.items()}
    by_span: dict[tuple[date, date], list[str]] = defaultdict(list)
    for cabinet, days in days_of.items():
        first, last = min(days), max(days)
        if (last - first).days < WIDEN_WITHIN_DAYS:
            by_span[(first, last)].append(cabinet)
    if by_span:
        first, last = min(f for f, _ in by_span), max(la for _, la in by_span)
        if (last - first).days < WIDEN_WITHIN_DAYS:  # the spans together are still short: one span
            by_span = {(first, last): [c for cabinets in by_span.values() for c in cabinets]}
    position = {c: i for i, c in enumerate(cabinet_order)}
    for (first, last), cabinets in by_span.items():
        rollups = set().union(*(rollups_of[c] for c in cabinets))
        known = [position[c] for c in cabinets if c in position]
        between = cabinet_order[min(known) : max(known) + 1] if known else []
        for cabinet in {*cabinets, *between}:
            for n in range((last - first).days + 1):
                out.setdefault((cabinet, first + timedelta(n)), set()).update(rollups)
    return out


def plan_recomputes(
    demands: Mapping[tuple[str, date], set[str]],
    cabinet_order: Sequence[str],
    *,
    products: Mapping[str, int] | None = None,
    max_partitions: int = MAX_PARTITIONS_PER_RUN,
    max_product_days: int = MAX_PRODUCT_DAYS_PER_RUN,
) -> list[Recompute]:
    """The fewest runs this method finds that recompute exactly the demanded (rollup, cabinet, day)s.

    ``cabinet_order`` is the order of the dynamic cabinet partitions: a partition range covers the
    cabinets between its ends in that order, so only neighbours there can share a run. A cabinet not
    in it gets runs of its own. ``products`` (a cabinet's products; DEFAULT_PRODUCTS when unknown)
    sizes the runs: at most ``max_product_days`` and ``max_partitions`` each.
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
            plan.extend(
                _split(Recompute(tuple(group), start, end, rollups), max_partitions, max_product_days, products or {})
            )
    return sorted(plan, key=lambda r: (r.start, r.cabinets, r.rollups))


# --- the sensor's cursor -------------------------------------------------------------------


def parse_cursor(cursor: str | None) -> dict[str, int]:
    """The sensor's cursor: a JSON object of names → integers (``planned_at``: when it last planned).
    A cursor of the sensor's earlier versions (the last event read per feed) reads as one that never
    planned."""
    if not cursor:
        return {}
    try:
        raw = json.loads(cursor)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in raw.items()):
        raise InvalidInput(
            f"cursor {cursor[:80]!r} is not a JSON object of names → integers; "
            "clear it in the UI: the sensor then plans at its next tick"
        )
    return raw


# --- rnp-merge-sync (the nightly merge) --------------------------------------------------------


def merge_sync_demands(
    cabinets: Sequence[str],
    today: date,
    first_day: date,
    healed: Sequence[tuple[str, date]],
    placed: Sequence[tuple[str, date]],
) -> Demands:
    """Every rollup and the merge for the last MERGE_WINDOW_DAYS days of each cabinet and the
    ``healed`` pairs; the finance rollup of the ``placed`` pairs (where the window's report lines
    belong: their source orders' days)."""
    window = [today - timedelta(n) for n in range(MERGE_WINDOW_DAYS)]
    demands: Demands = {}
    for pair in placed:
        demands[pair] = {"rnp_finance"}
    for pair in [(c, d) for c in cabinets for d in window if d >= first_day] + list(healed):
        demands[pair] = set(ROLLUPS)
    return demands


@dataclass
class DuePairs:
    """What the watermarks say is due (``due_pairs``)."""

    #: (cabinet, day) → the РНП tables due there.
    tables: dict[tuple[str, date], set[str]] = field(default_factory=dict)
    #: Since when the longest-waiting pair is due (None: none is).
    oldest: datetime | None = None
    #: Names the watermarks' state read: the same state gives the same name (a sensor tick evaluated
    #: again after a crash asks for the same runs), any change since a new one, a pair that became
    #: due again among them (its ``due_since`` is new even when its count is not: a write to the mart
    #: by someone else forgets what was recomputed without counting a change).
    state: str = ""

    def demands(self) -> Demands:
        """The recompute a due pair needs: its due rollups (none: the merge alone, which always runs)."""
        return {pair: {t for t in tables if t in ROLLUPS} for pair, tables in self.tables.items()}

    def by_table(self) -> dict[str, list[tuple[str, date]]]:
        """The pairs to recompute in one run, by РНП table (``mart.recompute.recompute_tables``): each
        rollup's due pairs, and the merge of every due pair."""
        pairs = sorted(self.tables)
        return {t: [p for p in pairs if t in self.tables[p]] for t in ROLLUPS} | {MART: pairs}


def due_pairs(conn: psycopg.Connection, first: date, last: date, cabinets: Sequence[str] | None = None) -> DuePairs:
    """The pairs in [first, last] whose watermark says they are due (sql/due_pairs.sql: their feeds
    changed after their last recompute, or they were never recomputed), of ``cabinets`` if given, and
    covered by rnp_daily's table partitions (the others' rows are dropped by design and would be due
    for ever)."""
    rows = conn.execute(
        statement("due_pairs"),
        {
            "cabinets": None if cabinets is None else list(cabinets),
            "first": first,
            "last": last,
            "tables": [*ROLLUPS, MART],
        },
    ).fetchall()
    covered = covered_days(list_partitions(conn, MART), [day for _, day, *_ in rows])
    due = DuePairs()
    state = hashlib.sha1()
    for (cabinet, day, table, changes, since), ok in zip(rows, covered, strict=True):
        if not ok:
            continue
        due.tables.setdefault((cabinet, day), set()).add(table)
        due.oldest = since if due.oldest is None else min(due.oldest, since)
        state.update(f"{cabinet}|{day}|{table}|{changes}|{since.isoformat()};".encode())
    due.state = state.hexdigest()[:12]
    return due


@dataclass
class ReaggregationPlan:
    """What one tick of the re-aggregation sensor asks for (``plan_reaggregation``)."""

    recomputes: list[Recompute]
    due: DuePairs
    #: Cabinets with due pairs that have no partitions yet: the sensor adds them.
    new_cabinets: list[str] = field(default_factory=list)


def plan_reaggregation(
    connect: Connect,
    cabinet_order: Sequence[str],
    first_day: date,
    today: date,
    *,
    products: Mapping[str, int] | None = None,
) -> ReaggregationPlan:
    """The re-aggregation sensor's plan: every pair of [first_day, today] the watermarks say is due
    (``due_pairs``, read through ``connect``), widened into few rectangles (``widen``: the recompute
    skips what did not change) and batched into runs (``plan_recomputes``) over the dynamic
    partitions' ``cabinet_order``, sized by ``products``. A failed read raises: nothing is lost, the
    pairs stay due."""
    with connect() as conn:
        due = due_pairs(conn, first_day, today)
    demands = widen(due.demands(), cabinet_order)
    return ReaggregationPlan(
        recomputes=plan_recomputes(demands, cabinet_order, products=products),
        due=due,
        new_cabinets=sorted({c for c, _ in due.tables} - set(cabinet_order)),
    )


def days_to_heal(conn: psycopg.Connection, cabinets: Sequence[str], first: date, last: date) -> list[tuple[str, date]]:
    """(cabinet, day) pairs in [first, last] with orders but no rnp_daily rows, index probes only."""
    rows = conn.execute(
        statement("days_to_heal"),
        {"cabinets": list(cabinets), "first": first, "last": last},
    ).fetchall()
    return [(c, d) for c, d in rows]


def source_order_days(
    conn: psycopg.Connection, cabinets: Sequence[str], first: date, last: date
) -> list[tuple[str, date]]:
    """(cabinet, day) of the source orders of the report lines of [first, last] (their own day) that
    belong to another day: where those lines are placed (their attributed_day, migration 0015)."""
    rows = conn.execute(
        statement("source_order_days"),
        {"cabinets": list(cabinets), "first": first, "last": last},
    ).fetchall()
    return [(c, d) for c, d in rows]


@dataclass
class MergeSyncPlan:
    demands: Demands
    healed: list[tuple[str, date]]
    #: Pairs outside the window whose watermark said due, recomputed with the window.
    stale: list[tuple[str, date]] = field(default_factory=list)


def plan_merge_sync(conn: psycopg.Connection, cabinets: Sequence[str], today: date, first_day: date) -> MergeSyncPlan:
    """Every rollup and the merge for the last MERGE_WINDOW_DAYS days of each cabinet, plus the
    days of the last HEAL_DAYS with orders and no rnp_daily rows, plus every day whose watermark
    is due, whatever its age (``due_pairs``), plus the finance rollup of the days where
    report lines of the window belong (their source orders' days): a line whose order arrived
    after it leaves its own day and reaches its order's even if the sensor missed the order's
    event. Days without a table partition are left out: their rows are dropped by design, and
    would be "healed" every night."""
    heal_from = max(first_day, today - timedelta(HEAL_DAYS - 1))
    candidates = days_to_heal(conn, cabinets, heal_from, today) if cabinets else []
    window_start = today - timedelta(MERGE_WINDOW_DAYS - 1)
    placed = source_order_days(conn, cabinets, window_start, today) if cabinets else []
    partitions = list_partitions(conn, MART)

    def covered(pairs: list[tuple[str, date]]) -> list[tuple[str, date]]:
        ok = covered_days(partitions, [d for _, d in pairs])
        return [p for p, keep in zip(pairs, ok, strict=True) if keep and p[1] >= first_day]

    healed = covered(candidates)
    window = {(c, today - timedelta(n)) for c in cabinets for n in range(MERGE_WINDOW_DAYS)}
    stale = sorted(set(due_pairs(conn, first_day, today, cabinets).tables) - window - set(healed)) if cabinets else []
    demands = merge_sync_demands(cabinets, today, first_day, [*healed, *stale], covered(placed))
    return MergeSyncPlan(demands, healed, stale)
