"""РНП ("рука на пульсе", hand on the pulse): the daily mart ``rnp_daily`` and its three rollups.

One row per cabinet × Moscow day × product. Each domain is rolled up on its own from its WB feed
(``rnp_sales`` from orders and sales, ``rnp_ads`` from ad statistics, ``rnp_finance`` from the
realization report), and ``rnp_daily`` merges the three with the funnel and the day's stock. These
assets are the only writers of the four tables. Every recompute is set-based SQL in PostgreSQL
(``sql/rnp_*.sql``, where each column's definition sits next to the statement that computes it)
and makes the rows of its (cabinet, day) partitions equal to what the feeds say, in one
transaction: rows that changed are rewritten, the others left alone, so running it again changes
nothing (and the 5-minute ads sync does not rewrite every product of the day).

Runs come from three places: the re-aggregation sensor (sensors/rnp.py) when a feed partition
changes, the nightly rnp-merge-sync (orchestration/cadences.py), and people (the UI, backfills, the CLI). A run
may cover a rectangle of cabinets × consecutive days (a partition range): the SQL takes all its
(cabinet, day) pairs at once, in bounded transactions.
"""

# No `from __future__ import annotations`: Dagster checks the context annotations at definition time.
import threading
import time
from collections import deque
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import psycopg
from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSelection,
    AssetSpec,
    BackfillPolicy,
    Backoff,
    MaterializeResult,
    OpExecutionContext,
    RetryPolicy,
    define_asset_job,
    in_process_executor,
    multi_asset,
    multi_asset_check,
)
from psycopg import sql

from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.errors import OptimaError
from optima_pipelines.ops.freshness import catching_up
from optima_pipelines.ops.records import record_reaggregation
from optima_pipelines.orchestration.dagster_internals import log_materializations
from optima_pipelines.orchestration.queues import TAG_TRIGGER
from optima_pipelines.orchestration.retries import fail_on_permanent, is_transient
from optima_pipelines.orchestration.rnp_plan import MART, ROLLUPS, FeedEvent, demands_from_events
from optima_pipelines.partitions import CABINET_DAY, cabinet_day_key, parse_cabinet_day_key
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.table_partitions import covered_days, list_partitions

#: In the order a recompute of all domains runs them: the merge reads the rollups.
TABLES = (*ROLLUPS, MART)

#: Partitions (cabinet-days) replaced per transaction: bounds the lock time and the transaction's size
#: when one run covers months of a cabinet or a day of many cabinets. A quarter, so that a 90-day
#: import (and the nightly 90-day self-heal of a cabinet) reads each feed once, not once per chunk.
PARTITIONS_PER_TRANSACTION = 92
#: The feed tables each statement reads (the rollups it reads are written just before, by the run).
INPUTS: dict[str, tuple[str, ...]] = {
    "rnp_sales": ("wb_orders", "wb_sales"),
    "rnp_ads": ("ad_campaign_stats",),
    "rnp_finance": ("wb_report_lines",),
    "rnp_daily": ("rnp_funnel_stats", "stocks"),
}
#: First key of the two-key advisory locks that serialise writers of one (cabinet, day) of the РНП.
_LOCK_NAMESPACE = 0x524E50  # "RNP"
#: Transactions a recompute runs at once, each on its own connection, each over its own days and
#: every table asked for. PostgreSQL runs a statement on one core (it never runs an INSERT … SELECT
#: in parallel): two connections use both cores of the 2-core machines this is sized for
#: (bench/rnp_recompute.py). A run's warehouse pool has OPTIMA_SWEEP_THREADS + 2 sessions.
RECOMPUTE_CONNECTIONS = 2

#: The original re-aggregate queue: 3 attempts with backoff, for transient database trouble (a lost
#: connection, a serialization failure); a data, integrity or syntax error fails at once.
RECOMPUTE_RETRY = RetryPolicy(max_retries=2, delay=1, backoff=Backoff.EXPONENTIAL)


#: The text of ``assets/sql/<name>.sql``.
statement = SqlFiles(__file__)


#: Memory for the hash joins and aggregations of one recompute transaction: a quarter of one large
#: cabinet (90 days × 5,000 products, 3 M feed rows) aggregates in memory instead of in 100+ batches
#: spilled to disk (bench/rnp_recompute.py).
WORK_MEM = "256MB"
_KEY = ("cabinet_id", "day", "nm_id")

#: What a recompute changes: ``computed`` (the table's .sql file), kept to the run's (cabinet, day)
#: pairs, set against the rows the pairs hold now in one full join (a hash or merge join whatever
#: the planner's estimates). One row per row to insert (``old_nm_id`` NULL), to update (both keys
#: set, values differ) or to delete (``nm_id`` NULL); ``covered`` is false for rows of days without
#: a table partition, which are only counted. ``first``/``last`` bound the days so that the planner
#: reads only the table partitions of the run.
_DELTA = """
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body},
scoped AS (
    SELECT c.*, k.covered FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day
),
existing AS (
    SELECT t.*
    FROM keys k JOIN {table} t ON t.cabinet_id = k.cabinet_id AND t.day = k.day
    WHERE t.day BETWEEN %(first)s AND %(last)s
)
SELECT c.*, e.cabinet_id AS old_cabinet_id, e.day AS old_day, e.nm_id AS old_nm_id
FROM scoped c
FULL JOIN existing e ON e.cabinet_id = c.cabinet_id AND e.day = c.day AND e.nm_id = c.nm_id
WHERE c.nm_id IS NULL OR e.nm_id IS NULL OR ({computed_values}) IS DISTINCT FROM ({existing_values})
"""

#: A first fill (the table holds no row of the pairs): the computed rows go straight into the table,
#: without the full join against nothing and the temporary copy of every row a delta would be.
_FILL = """
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body}
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT c.cabinet_id, c.day, c.nm_id, {computed_values}
FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day
WHERE k.covered
"""
#: A first fill whose pairs are every (cabinet, day) of the rectangle the feeds are read by, each
#: with a table partition (a run over consecutive days of its cabinets, as ranged runs are): every
#: computed row is one to write, and the join with the pairs is left out.
_FILL_RECTANGLE = """
WITH {body}
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT c.cabinet_id, c.day, c.nm_id, {computed_values}
FROM computed c
"""
_UNCOVERED = """
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body}
SELECT count(*) FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day WHERE NOT k.covered
"""
_ANY = """
SELECT EXISTS (
    SELECT 1 FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
    JOIN {table} t ON t.cabinet_id = k.cabinet_id AND t.day = k.day
    WHERE t.day BETWEEN %(first)s AND %(last)s
)
"""
#: After a first fill of a rollup: rnp_daily of its pairs is stale.
_MART_STALE_PAIRS = """
UPDATE rnp_watermarks w SET changes = w.changes + 1
FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
WHERE w.cabinet_id = k.cabinet_id AND w.table_name = 'rnp_daily' AND w.day = k.day
"""

#: The writes, each run only when the delta has rows for it, from the delta in a temporary table:
#: the planner sees its real size (a handful of rows after a late cancellation, every row at a
#: first fill), and a first fill is a plain INSERT (no conflict check: the cabinet's advisory lock
#: keeps other writers out).
_UPDATE = """
UPDATE {table} t SET ({columns}, updated_at) = ({delta_values}, now())
FROM rnp_delta d
WHERE d.nm_id IS NOT NULL AND d.old_nm_id IS NOT NULL AND t.day BETWEEN %(first)s AND %(last)s
  AND t.cabinet_id = d.cabinet_id AND t.day = d.day AND t.nm_id = d.nm_id
"""
_INSERT = """
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT d.cabinet_id, d.day, d.nm_id, {delta_values} FROM rnp_delta d WHERE d.old_nm_id IS NULL AND d.covered
"""
_DELETE = """
DELETE FROM {table} t
USING rnp_delta d
WHERE d.nm_id IS NULL AND t.day BETWEEN %(first)s AND %(last)s
  AND t.cabinet_id = d.old_cabinet_id AND t.day = d.old_day AND t.nm_id = d.old_nm_id
"""
#: The watermarks of the pairs (assets/../db/migrations/versions/0012_rnp_watermarks.py), created if
#: missing and locked, in the order the feeds' triggers lock them: a feed write that is not
#: committed yet holds its pairs' rows, so the recompute waits for it and then sees its rows; one
#: that comes later bumps ``changes`` after the recompute's commit, and the pair is stale again.
_WATERMARKS = """
INSERT INTO rnp_watermarks AS w (cabinet_id, table_name, day)
SELECT DISTINCT k.cabinet_id, k.table_name, k.day
FROM unnest(%(cabinets)s::text[], %(tables)s::text[], %(days)s::date[]) AS k (cabinet_id, table_name, day)
ORDER BY 1, 2, 3
ON CONFLICT (cabinet_id, table_name, day) DO UPDATE SET changes = w.changes
"""
#: The pairs of a table whose feeds did not change since their last recompute (rows locked above).
_FRESH = """
SELECT w.cabinet_id, w.day
FROM rnp_watermarks w JOIN unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
  ON w.cabinet_id = k.cabinet_id AND w.day = k.day
WHERE w.table_name = %(table)s AND w.recomputed = w.changes
"""
#: The pairs recomputed (and covered by a table partition) are up to date with the feeds.
_MARK_RECOMPUTED = """
UPDATE rnp_watermarks w SET recomputed = w.changes
FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
WHERE w.cabinet_id = k.cabinet_id AND w.table_name = %(table)s AND w.day = k.day
"""
#: A rollup's changed rows make rnp_daily of their pairs stale (the merge reads the rollups).
_MART_STALE = """
UPDATE rnp_watermarks w SET changes = w.changes + 1
FROM (SELECT DISTINCT coalesce(cabinet_id, old_cabinet_id) AS cabinet_id, coalesce(day, old_day) AS day
      FROM rnp_delta) d
WHERE w.cabinet_id = d.cabinet_id AND w.table_name = 'rnp_daily' AND w.day = d.day
"""
_COUNT = """
SELECT count(*) FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
JOIN {table} t ON t.cabinet_id = k.cabinet_id AND t.day = k.day
WHERE t.day BETWEEN %(first)s AND %(last)s
"""


def value_columns(conn: psycopg.Connection, table: str) -> list[str]:
    """The table's columns a recompute computes: all but the key and ``updated_at``."""
    rows = conn.execute(
        """
        SELECT attname FROM pg_attribute
        WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum
        """,
        (table,),
    ).fetchall()
    return [name for (name,) in rows if name not in (*_KEY, "updated_at")]


def _statement(template: str, table: str, columns: Sequence[str]) -> sql.Composed:
    def values(alias: str) -> sql.Composable:
        return sql.SQL(", ").join(sql.Identifier(alias, c) for c in columns)

    return sql.SQL(template).format(
        body=sql.SQL(statement(table)),  # type: ignore[arg-type]  # our own file, not input
        table=sql.Identifier(table),
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        computed_values=values("c"),
        existing_values=values("e"),
        delta_values=values("d"),
    )


@dataclass
class RecomputeStats:
    table: str
    partitions: int = 0
    #: Rows the partitions hold now.
    rows: int = 0
    #: Of those, rows inserted or whose values changed (the others were left as they were).
    rows_changed: int = 0
    #: Rows deleted because nothing upstream produces them any more.
    rows_removed: int = 0
    #: Rows computed for days that have no table partition: dropped, by design (partition-manager).
    rows_dropped: int = 0
    days_outside_partitions: set[date] = field(default_factory=set)
    #: Pairs skipped: their feeds have not changed since their last recompute (their watermark).
    unchanged: int = 0
    #: Seconds this table's statements took, summed over the transactions (which may run at once).
    seconds: float = 0.0

    def add(self, other: "RecomputeStats") -> None:
        self.seconds += other.seconds
        self.partitions += other.partitions
        self.rows += other.rows
        self.rows_changed += other.rows_changed
        self.rows_removed += other.rows_removed
        self.rows_dropped += other.rows_dropped
        self.days_outside_partitions |= other.days_outside_partitions
        self.unchanged += other.unchanged

    def metadata(self) -> dict[str, Any]:
        # A ranged run reports one result for all its partitions, hence "batch_".
        return {
            "batch_partitions": self.partitions,
            "batch_rows": self.rows,
            "batch_partitions_unchanged": self.unchanged,
            "batch_rows_changed": self.rows_changed,
            "batch_rows_removed": self.rows_removed,
            "batch_rows_dropped_outside_table_partitions": self.rows_dropped,
            "batch_days_outside_table_partitions": sorted(d.isoformat() for d in self.days_outside_partitions),
        }


def _lock_pairs(conn: psycopg.Connection, pairs: Sequence[tuple[str, date]]) -> None:
    # Two runs may recompute the same (cabinet, day) at once (the sensor and the nightly merge): the
    # second must compute after the first has committed, or both insert the same new row and one
    # fails on the primary key. A lock per pair, not per cabinet, so that the transactions of one
    # run over different days of a cabinet run at once. Taken in the order of their keys, so runs
    # over overlapping pairs cannot deadlock (two pairs sharing a key only wait for each other).
    # The day as a number: a date's text depends on the session's DateStyle.
    conn.execute(
        """
        SELECT count(pg_advisory_xact_lock(%s, k))
        FROM (SELECT DISTINCT hashtext(c || '|' || (d - date '2000-01-01')) AS k
              FROM unnest(%s::text[], %s::date[]) AS p (c, d) ORDER BY k) AS s
        """,
        (_LOCK_NAMESPACE, [c for c, _ in pairs], [d for _, d in pairs]),
    )


def recompute(
    conn: psycopg.Connection, by_table: Mapping[str, Sequence[tuple[str, date]]], *, force: bool = False
) -> dict[str, RecomputeStats]:
    """Make the tables' rows of these (cabinet, day) pairs what the feeds say, inside the caller's
    transaction: changed rows are updated, new ones inserted, vanished ones deleted; the rollups
    first, then the mart, which reads them (this transaction's rows). Pairs whose feeds have not
    changed since their last recompute (their watermark) are skipped, unless ``force``."""
    wanted = {t: sorted(set(by_table[t])) for t in TABLES if by_table.get(t)}
    out = {t: RecomputeStats(table=t, partitions=len(set(by_table[t]))) for t in by_table}
    if not wanted:
        return out
    _lock_pairs(conn, sorted(set().union(*wanted.values())))
    # Our own writes to the tables do not reset their watermarks (migration 0012's trigger).
    conn.execute("SET LOCAL optima.rnp_recompute = 'on'")
    conn.execute(sql.SQL("SET LOCAL work_mem = {}").format(sql.Literal(WORK_MEM)))
    # Index probes cost what they cost on SSD or in cache, not PostgreSQL's spinning-disk default (4):
    # with the default a one-day recompute hashes every report line of the cabinet (0.57 s) instead
    # of probing the lines of its orders by srid.
    conn.execute("SET LOCAL random_page_cost = 1.1")
    # Compiling the finance aggregate's expressions costs more than it saves.
    conn.execute("SET LOCAL jit = off")
    # Every watermark of the transaction (a rollup's and, since it changes the mart, the mart's) in
    # one statement, in key order: locking them table by table could lock out of the feeds' order.
    marks = sorted(
        {
            (c, name, d)
            for t, pairs in wanted.items()
            for c, d in pairs
            for name in ((t, MART) if t in ROLLUPS else (t,))
        }
    )
    conn.execute(
        _WATERMARKS,
        {"cabinets": [c for c, _, _ in marks], "tables": [t for _, t, _ in marks], "days": [d for _, _, d in marks]},
    )
    for table, pairs in wanted.items():
        started = time.perf_counter()
        _recompute_table(conn, table, pairs, out[table], force=force)
        out[table].seconds = time.perf_counter() - started
    return out


def _recompute_table(
    conn: psycopg.Connection, table: str, pairs: list[tuple[str, date]], stats: RecomputeStats, *, force: bool
) -> None:
    if not force:
        # Read after the rollups of this transaction: their changes make the mart's pairs stale.
        fresh = set(
            conn.execute(
                _FRESH, {"cabinets": [c for c, _ in pairs], "days": [d for _, d in pairs], "table": table}
            ).fetchall()
        )
        stats.unchanged = len(fresh)
        pairs = [p for p in pairs if p not in fresh]
        if not pairs:
            return
    cabinets = [c for c, _ in pairs]
    days = [d for _, d in pairs]
    # Creating or dropping a partition locks the whole table: holding this lock until commit keeps
    # the partitions read below the ones the statement writes into.
    conn.execute(sql.SQL("LOCK TABLE {} IN ROW EXCLUSIVE MODE").format(sql.Identifier(table)))
    covered = covered_days(list_partitions(conn, table), days)
    cabinet_ids, first, last = sorted(set(cabinets)), min(days), max(days)
    params: dict[str, Any] = {
        "cabinets": cabinets,
        "days": days,
        "covered": covered,
        # The rectangle around the pairs: what the feeds are read by (see sql/rnp_sales.sql).
        "cabinet_ids": cabinet_ids,
        "first": first,
        "last": last,
    }
    if table == MART:
        # The mart's joins are full joins, hash or merge. The rollups it reads were written by this
        # transaction and have no statistics yet: estimated at a row or two, the planner sorted
        # 200,000 of them for a merge join (2.7 s of a 45-day transaction's 5 s, bench/rnp_recompute.py).
        conn.execute("SET LOCAL enable_mergejoin = off")
    columns = value_columns(conn, table)
    done = [p for p, ok in zip(pairs, covered, strict=True) if ok]
    done_params = {"cabinets": [c for c, _ in done], "days": [d for _, d in done], "table": table}
    stats.days_outside_partitions = {d for d, ok in zip(days, covered, strict=True) if not ok}
    held = conn.execute(_statement(_ANY, table, columns), params).fetchone()
    if held is not None and not held[0]:
        rectangle = all(covered) and len(pairs) == len(cabinet_ids) * ((last - first).days + 1)
        inserted = conn.execute(_statement(_FILL_RECTANGLE if rectangle else _FILL, table, columns), params).rowcount
        if stats.days_outside_partitions:
            dropped = conn.execute(_statement(_UNCOVERED, table, columns), params).fetchone()
            stats.rows_dropped = int(dropped[0]) if dropped else 0
        if table in ROLLUPS and inserted:
            conn.execute(_MART_STALE_PAIRS, done_params)
        conn.execute(_MARK_RECOMPUTED, done_params)
        stats.rows = stats.rows_changed = inserted
        return
    conn.execute("DROP TABLE IF EXISTS pg_temp.rnp_delta")
    conn.execute(
        sql.SQL("CREATE TEMP TABLE rnp_delta ON COMMIT DROP AS {}").format(_statement(_DELTA, table, columns)), params
    )
    row = conn.execute(
        """
        SELECT count(*) FILTER (WHERE nm_id IS NOT NULL AND old_nm_id IS NOT NULL),
               count(*) FILTER (WHERE old_nm_id IS NULL AND covered),
               count(*) FILTER (WHERE nm_id IS NULL),
               count(*) FILTER (WHERE NOT covered)
        FROM rnp_delta
        """
    ).fetchone()
    assert row is not None
    to_update, to_insert, to_delete, stats.rows_dropped = (int(v) for v in row)
    for count, template in ((to_update, _UPDATE), (to_insert, _INSERT), (to_delete, _DELETE)):
        if count:
            conn.execute(_statement(template, table, columns), params)
    stats.rows_changed, stats.rows_removed = to_update + to_insert, to_delete
    if table in ROLLUPS and (to_update or to_insert or to_delete):
        conn.execute(_MART_STALE)
    conn.execute(_MARK_RECOMPUTED, done_params)
    counted = conn.execute(_statement(_COUNT, table, columns), params).fetchone()
    assert counted is not None
    stats.rows = int(counted[0])


def refresh_statistics(conn: psycopg.Connection, tables: Sequence[str]) -> list[str]:
    """ANALYZE the tables that were never analyzed or changed by more than half since.

    Right after a bulk load (a new deployment's or a new cabinet's first import, which is exactly
    when its РНП is recomputed) autovacuum may not have run yet. Without statistics the planner
    takes the feed tables for tiny and joins report lines to orders by scanning the cabinet's
    lines once per order: minutes instead of a second (bench/rnp_recompute.py shows both)."""
    stale = [
        name
        for (name,) in conn.execute(
            """
            SELECT relname FROM pg_stat_user_tables
            WHERE schemaname = current_schema() AND relname = ANY(%s) AND n_live_tup > 0
              AND (coalesce(last_analyze, last_autoanalyze) IS NULL OR n_mod_since_analyze > n_live_tup / 2)
            """,
            (list(tables),),
        ).fetchall()
    ]
    for name in stale:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
    return stale


def recompute_tables(
    warehouse: Warehouse, by_table: Mapping[str, Sequence[tuple[str, date]]], *, force: bool = False
) -> dict[str, RecomputeStats]:
    """Recompute each table for its (cabinet, day) pairs: the pairs in transactions of at most
    PARTITIONS_PER_TRANSACTION, each over every table asked for, RECOMPUTE_CONNECTIONS of them at
    once on their own connections (the pairs whose feeds did not change since their last recompute
    are skipped, unless ``force``). The connection that refreshes the feeds' statistics runs
    transactions too; with one transaction it is the only one.

    A (cabinet, day) is written in one transaction, its rollups and its mart together: a reader sees
    all of it or none of it, and a failure in any statement leaves that transaction's pairs as they
    were. Transactions of different pairs commit independently; after a failure no further one
    starts, and the failure is raised once the running ones have ended (a retry finds the committed
    pairs fresh by their watermarks)."""
    wanted = {t: sorted(set(by_table[t])) for t in TABLES if by_table.get(t)}
    totals = {t: RecomputeStats(table=t) for t in by_table}
    if not wanted:
        return totals
    every = sorted(set().union(*wanted.values()))
    size = min(PARTITIONS_PER_TRANSACTION, -(-len(every) // RECOMPUTE_CONNECTIONS))
    pending = deque(set(every[i : i + size]) for i in range(0, len(every), size))
    results: list[dict[str, RecomputeStats]] = []
    failures: list[BaseException] = []

    def work(conn: psycopg.Connection) -> None:
        # One connection's transactions, one after the other, until no chunk is left or one failed.
        while pending and not failures:
            try:
                chunk = pending.popleft()
            except IndexError:  # another connection took the last one
                return
            try:
                with conn.transaction():
                    result = recompute(
                        conn, {t: [p for p in pairs if p in chunk] for t, pairs in wanted.items()}, force=force
                    )
            except BaseException as exc:
                failures.append(exc)
                return
            results.append(result)

    def own_connection() -> None:
        try:
            with warehouse.connect() as conn:
                work(conn)
        except BaseException as exc:  # could not connect
            failures.append(exc)

    with warehouse.connect() as conn:
        with conn.transaction():
            refresh_statistics(conn, sorted({feed for t in wanted for feed in INPUTS[t]}))
        helpers = [
            threading.Thread(target=own_connection, name=f"rnp-{n}")
            for n in range(1, min(RECOMPUTE_CONNECTIONS, len(pending)))
        ]
        for helper in helpers:
            helper.start()
        work(conn)
        for helper in helpers:
            helper.join()
    if failures:
        raise failures[0]
    for result in results:
        for table, stats in result.items():
            totals[table].add(stats)
    return totals


def recompute_partitions(
    warehouse: Warehouse, table: str, pairs: Sequence[tuple[str, date]], *, force: bool = False
) -> RecomputeStats:
    """One table's recompute_tables."""
    return recompute_tables(warehouse, {table: pairs}, force=force)[table]


def _run_pairs(context: AssetExecutionContext | AssetCheckExecutionContext) -> list[tuple[str, date]]:
    return [parse_cabinet_day_key(str(key)) for key in context.partition_keys]


#: The run tag the re-aggregation sensor and the nightly merge set: when the oldest change their run
#: answers was stored (ISO 8601, UTC). The re-aggregation lag metrics measure from it.
TAG_SOURCE_EVENT_AT = "optima/source-event-at"
#: ``all`` on a run: recompute every pair of the run, even those whose watermark says their feeds
#: did not change (the nightly rnp-merge-sync sets it: it is the safety net; a person may set it).
TAG_RECOMPUTE = "optima/rnp-recompute"


def _source_event_at(tags: Mapping[str, str]) -> datetime | None:
    try:
        moment = datetime.fromisoformat(tags[TAG_SOURCE_EVENT_AT])
    except (KeyError, ValueError):
        return None
    return moment if moment.tzinfo is not None else None


def _record(
    context: AssetExecutionContext | OpExecutionContext,
    warehouse: Warehouse,
    table: str,
    pairs: Sequence[tuple[str, date]],
    started_at: datetime,
    *,
    stats: RecomputeStats | None = None,
    error: BaseException | None = None,
) -> None:
    """One re-aggregation record per cabinet of the run, for /metrics (optima_reaggregate_*)."""
    tags = context.run.tags
    outside = stats.days_outside_partitions if stats is not None else set()
    by_cabinet: dict[str, list[date]] = {}
    for cabinet, day in pairs:
        by_cabinet.setdefault(cabinet, []).append(day)
    finished_at = datetime.now(UTC)
    with warehouse.connect() as conn, conn.transaction():
        for cabinet, days in sorted(by_cabinet.items()):
            record_reaggregation(
                conn,
                domain=table.replace("_", "-"),
                cabinet_id=cabinet,
                run_id=context.run_id,
                trigger=tags.get(TAG_TRIGGER, "manual"),
                started_at=started_at,
                finished_at=finished_at,
                status="success" if error is None else "failure",
                partitions_requested=len(days),
                partitions_recomputed=0 if error is not None else sum(d not in outside for d in days),
                source_event_at=_source_event_at(tags),
                error=None if error is None else f"{error.__class__.__name__}: {error}",
            )


def _warn_dropped(context: AssetExecutionContext | OpExecutionContext, stats: RecomputeStats) -> None:
    if stats.rows_dropped:
        context.log.warning(
            f"{stats.table}: {stats.rows_dropped} rows of {len(stats.days_outside_partitions)} days without a table "
            f"partition were dropped (days {', '.join(sorted(d.isoformat() for d in stats.days_outside_partitions))}); "
            "the partition-manager keeps OPTIMA_PARTITION_RETENTION_MONTHS of history"
        )


def recompute_in_run(context: OpExecutionContext, warehouse: Warehouse, events: Sequence[FeedEvent]) -> None:
    """A user's import recomputes the РНП of what it changed in its own run, through the code of the
    four assets (``recompute_tables``, the same records and metadata), and records their
    materializations and the mart's checks as a run of ``rnp_recompute`` would: the seller sees the
    days in rnp_daily without waiting for the re-aggregation sensor's tick and a second run's start.

    The same pairs as the sensor would ask for (``demands_from_events``). Their watermarks are then
    up to date, so the sensor, reading the import's feed events afterwards, requests nothing for
    them. Any failure here is logged and left to the sensor (the import's data is committed)."""
    today = today_moscow()
    wanted = demands_from_events(events, date.fromisoformat(load_settings().partitions_start), today)
    pairs = sorted(wanted.demands)
    if not pairs:
        return
    by_table = {t: [p for p in pairs if t in wanted.demands[p]] for t in ROLLUPS} | {MART: pairs}
    try:
        started_at = datetime.now(UTC)
        done = recompute_tables(warehouse, by_table)
        for table, stats in done.items():
            if not by_table[table]:
                continue
            _record(context, warehouse, table, by_table[table], started_at, stats=stats)
            _warn_dropped(context, stats)
            outside = stats.days_outside_partitions
            metadata = stats.metadata()
            log_materializations(
                context,
                [
                    AssetMaterialization(asset_key=table, partition=cabinet_day_key(cabinet, day), metadata=metadata)
                    for cabinet, day in by_table[table]
                    if day not in outside
                ],
            )
        with warehouse.connect() as conn:
            covered = covered_days(list_partitions(conn, MART), [d for _, d in pairs])
            checked = [p for p, ok in zip(pairs, covered, strict=True) if ok]
            rows = compare_with_feeds(conn, checked)
            filling = catching_up(conn, [c for c, _ in checked], CHECK_SOURCES)
        for outcome in evaluate_checks(rows, sorted(CHECK_METRICS), filling):
            # Dagster records an op's check evaluations (its type hints name only materializations).
            context.log_event(check_evaluation(outcome))  # type: ignore[arg-type]
    except Exception as exc:  # the sensor recomputes what is left stale
        context.log.warning(
            f"the РНП of {len(pairs)} (cabinet, day)s was not recomputed in this run ({exc.__class__.__name__}: "
            f"{str(exc)[:300]}); the re-aggregation sensor recomputes it"
        )


#: The four tables, each its own asset (its key, its partitions' materializations and metadata, its
#: lineage), computed by one op so that a run writes each (cabinet, day) of all four in one
#: transaction and its transactions run at once (recompute_tables): Dagster's in-process executor
#: runs one asset's op after the other, and a process per op costs seconds of start-up.
RNP_SPECS = [
    AssetSpec(
        "rnp_sales",
        deps=["wb_orders", "wb_sales"],
        description="РНП sales per cabinet, Moscow day and product: orders (count, sum, cancellations) on the day "
        "the order was placed, buyouts and returns on the day of the sale or return, average order price and SPP. "
        "Definitions: assets/sql/rnp_sales.sql and the README.",
    ),
    AssetSpec(
        "rnp_ads",
        deps=["ad_campaign_stats"],
        description="РНП advertising per cabinet, Moscow day and product: views, clicks, spend, carts and orders "
        "from ads over every campaign and app, with CTR, CPC and CPM. Definitions: assets/sql/rnp_ads.sql.",
    ),
    AssetSpec(
        "rnp_finance",
        # wb_orders: a report line belongs to the day of its source order.
        deps=["wb_report_lines", "wb_orders"],
        description="РНП finance per cabinet, Moscow day of the source order and product: realization, payout, "
        "commission, acquiring, logistics, storage, acceptance, penalties and other deductions from WB's "
        "realization report. Definitions: assets/sql/rnp_finance.sql.",
    ),
    AssetSpec(
        MART,
        deps=["rnp_sales", "rnp_ads", "rnp_finance", "rnp_funnel_stats", "stocks"],
        description="The РНП mart: one row per cabinet × Moscow day × product with sales, ads (and ДРР), finance, "
        "the funnel (card opens, add-to-cart, conversions) and the end-of-day stock. What the product's РНП "
        'screens read. Definitions: assets/sql/rnp_daily.sql and the README\'s "Data: rnp_daily".',
    ),
]


@multi_asset(
    name="rnp",
    specs=[spec.replace_attributes(group_name="rnp", kinds={"postgres"}) for spec in RNP_SPECS],
    partitions_def=CABINET_DAY,
    backfill_policy=BackfillPolicy.single_run(),
    retry_policy=RECOMPUTE_RETRY,
    can_subset=True,
)
def rnp(context: AssetExecutionContext, warehouse: Warehouse) -> Iterator[MaterializeResult]:
    """The run's tables (its selected assets) for its (cabinet, day) partitions."""
    tables = [t for t in TABLES if AssetKey(t) in context.selected_asset_keys]
    pairs = _run_pairs(context)
    started_at = datetime.now(UTC)
    try:
        force = context.run.tags.get(TAG_RECOMPUTE) == "all"
        done = recompute_tables(warehouse, dict.fromkeys(tables, pairs), force=force)
    except Exception as exc:
        # A data, integrity or syntax error fails at once (retries.is_transient's rule); a transient one
        # is retried by RECOMPUTE_RETRY. Either way the last attempt is a failure to count.
        permanent = isinstance(exc, psycopg.Error | OptimaError) and not is_transient(exc)
        if permanent or context.retry_number >= (RECOMPUTE_RETRY.max_retries or 0):
            for table in tables:
                _record(context, warehouse, table, pairs, started_at, error=exc)
        fail_on_permanent(exc, f"{', '.join(tables)} of {len(pairs)} partitions")
        raise
    for table in tables:
        _record(context, warehouse, table, pairs, started_at, stats=done[table])
        _warn_dropped(context, done[table])
        yield MaterializeResult(asset_key=table, metadata=done[table].metadata())


# --- asset checks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOutcome:
    check_name: str
    cabinet_id: str
    day: date
    passed: bool
    #: The feeds changed after the pair's last recompute: a mismatch is the mart behind, not wrong.
    stale: bool
    description: str
    metadata: dict[str, Any]


#: check name → (metrics compared, the source named in messages)
CHECK_METRICS: dict[str, tuple[tuple[str, ...], str]] = {
    "orders_match_wb_orders": (("orders_count", "orders_sum"), "wb_orders"),
    "ad_spend_matches_ad_campaign_stats": (("ad_spend",), "ad_campaign_stats"),
    "payout_matches_finance_lines": (("payout",), "wb_report_lines"),
}
_METRIC_COLUMNS = ("orders_count", "orders_sum", "ad_spend", "payout")
#: The feeds the checks compare the mart with: while a cabinet's first load of one is not done, its
#: pairs are stale (ops.freshness.catching_up).
CHECK_SOURCES = ("wb_orders", "ad_campaign_stats", "wb_report_lines")


def compare_with_feeds(conn: psycopg.Connection, pairs: Sequence[tuple[str, date]]) -> list[tuple]:
    """Per pair: cabinet, day, stale (rnp_checks.sql), then (rnp_daily, feed) for orders_count,
    orders_sum, ad_spend, payout."""
    ordered = sorted(set(pairs))
    with conn.transaction():
        # Index probes per pair; compiling them (the plan of 1,000 cabinets × 2 days costs above
        # jit_above_cost) took 2.4 s of a 3.5-s statement.
        conn.execute("SET LOCAL jit = off")
        rows = conn.execute(
            statement("rnp_checks"),
            {"cabinets": [c for c, _ in ordered], "days": [d for _, d in ordered], "tables": list(TABLES)},
        ).fetchall()
    return rows


def evaluate_checks(
    rows: Sequence[tuple], check_names: Sequence[str], filling: Collection[str] = frozenset()
) -> list[CheckOutcome]:
    """The outcome of each check for each compared row (as returned by compare_with_feeds). The
    pairs of ``filling`` cabinets (still on a feed's first load: ``ops.freshness.catching_up``) are
    stale too: a mismatch there is a warning, never an error."""
    outcomes = []
    for row in rows:
        cabinet_id, day, behind = row[0], row[1], bool(row[2])
        stale = behind or cabinet_id in filling
        pairs = dict(zip(_METRIC_COLUMNS, zip(row[3::2], row[4::2], strict=True), strict=True))
        for name in check_names:
            metrics, source = CHECK_METRICS[name]
            mismatches = [m for m in metrics if Decimal(pairs[m][0]) != Decimal(pairs[m][1])]
            metadata: dict[str, Any] = {"cabinet": cabinet_id, "day": day.isoformat(), "stale": stale}
            for m in metrics:
                metadata[f"{m}_rnp_daily"] = str(pairs[m][0])
                metadata[f"{m}_{source}"] = str(pairs[m][1])
            if mismatches:
                description = (
                    "; ".join(f"{m}: rnp_daily has {pairs[m][0]}, {source} has {pairs[m][1]}" for m in mismatches)
                    + f" (cabinet {cabinet_id}, day {day.isoformat()})"
                )
                if behind:
                    description += "; the feeds changed after its last recompute: a re-aggregation is due"
                elif stale:
                    description += "; the cabinet's feeds are still on their first load: the mart is catching up"
            else:
                description = ", ".join(f"{m} {pairs[m][0]}" for m in metrics) + f" match {source}"
            outcomes.append(CheckOutcome(name, cabinet_id, day, not mismatches, stale, description, metadata))
    return outcomes


def check_evaluation(outcome: CheckOutcome) -> AssetCheckEvaluation:
    """The Dagster evaluation of one (check, cabinet, day) outcome of rnp_daily's checks: a mismatch
    is an error, or a warning when the pair is stale (a feed committed after the recompute, between
    the mart's write and its check; the re-aggregation sensor mends it)."""
    return AssetCheckEvaluation(
        asset_key=AssetKey(MART),
        check_name=outcome.check_name,
        passed=outcome.passed,
        severity=AssetCheckSeverity.WARN if outcome.stale else AssetCheckSeverity.ERROR,
        description=outcome.description,
        metadata=outcome.metadata,
        partition=cabinet_day_key(outcome.cabinet_id, outcome.day),
    )


@multi_asset_check(
    name="rnp_daily_checks",
    specs=[
        AssetCheckSpec(
            "orders_match_wb_orders",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Orders count and sum of the day equal wb_orders for that cabinet and day.",
        ),
        AssetCheckSpec(
            "ad_spend_matches_ad_campaign_stats",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Ad spend of the day equals the sum of ad_campaign_stats for that cabinet and day.",
        ),
        AssetCheckSpec(
            "payout_matches_finance_lines",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Payout of the day equals the signed for_pay of the report lines attributed to it "
            "(source order's day, else the line's own day).",
        ),
    ],
    can_subset=True,
)
def rnp_daily_checks(context: AssetCheckExecutionContext, warehouse: Warehouse) -> Iterator[AssetCheckEvaluation]:
    """One result per check and rnp_daily partition of the run (a ranged run checks each of its days)."""
    pairs = _run_pairs(context)
    with warehouse.connect() as conn:
        covered = covered_days(list_partitions(conn, MART), [d for _, d in pairs])
        checked = [p for p, ok in zip(pairs, covered, strict=True) if ok]
        rows = compare_with_feeds(conn, checked)
        filling = catching_up(conn, [c for c, _ in checked], CHECK_SOURCES)
    if len(checked) < len(pairs):
        # Their rows were dropped by design; comparing them with the feeds would only ever fail.
        context.log.info(f"{len(pairs) - len(checked)} partitions have no rnp_daily table partition: not checked")
    names = sorted(k.name for k in context.selected_asset_check_keys)
    for outcome in evaluate_checks(rows, names, filling):
        yield check_evaluation(outcome)


#: The job the re-aggregation sensor and the nightly merge launch, with a subset of its assets.
rnp_recompute_job = define_asset_job(
    name="rnp_recompute",
    selection=AssetSelection.assets(*TABLES),
    partitions_def=CABINET_DAY,
    # One op (rnp): a process for it would only add seconds of start-up to every run.
    executor_def=in_process_executor,
    description="Recomputes РНП rollups and the rnp_daily merge for a rectangle of cabinets × days.",
)

#: The checks alone, for any partition or range: audits rnp_daily against the feeds without
#: recomputing it (the UI's launchpad or a backfill over months).
rnp_daily_check_job = define_asset_job(
    name="rnp_daily_check",
    selection=AssetSelection.checks_for_assets(MART),
    partitions_def=CABINET_DAY,
    executor_def=in_process_executor,
    description="Runs the rnp_daily asset checks (orders, ad spend, payout against the feeds) for a rectangle "
    "of cabinets × days.",
)
