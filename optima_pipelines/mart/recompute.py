"""The РНП recompute ("рука на пульсе", hand on the pulse): the daily mart ``rnp_daily`` and its
three rollups, made equal to what the feeds say. Free of Dagster: the assets of assets/rnp.py run it.

One row per cabinet × Moscow day × product. Each domain is rolled up on its own from its WB feed
(``rnp_sales`` from orders and sales, ``rnp_ads`` from ad statistics, ``rnp_finance`` from the
realization report), and ``rnp_daily`` merges the three with the funnel and the day's stock. Every
recompute is set-based SQL in PostgreSQL (``sql/rnp_*.sql``, where each column's definition sits
next to the statement that computes it; ``sql/delta.sql``, ``fill.sql``... the write the four share)
and makes the rows of its (cabinet, day) pairs equal to what the feeds say, in one transaction:
rows that changed are rewritten, the others left alone, so running it again changes nothing (and
the 5-minute ads sync does not rewrite every product of the day). Pairs whose watermark says their
feeds did not change since their last recompute are skipped (``rnp_watermarks``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import psycopg
from psycopg import sql

from optima_pipelines.db.connection import Connect
from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.mart.plan import MART, ROLLUPS
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

#: The text of ``mart/sql/<name>.sql``: the tables' rows (``rnp_<table>``), the write they share
#: (``delta``, ``fill``, ``update``...), the watermarks' statements and the checks' comparison.
statement = SqlFiles(__file__)


#: Memory for the hash joins and aggregations of one recompute transaction: a quarter of one large
#: cabinet (90 days × 5,000 products, 3 M feed rows) aggregates in memory instead of in 100+ batches
#: spilled to disk (bench/rnp_recompute.py).
WORK_MEM = "256MB"
_KEY = ("cabinet_id", "day", "nm_id")


def value_columns(conn: psycopg.Connection, table: str) -> list[str]:
    """The table's columns a recompute computes: all but the key and ``updated_at``."""
    rows = conn.execute(statement("value_columns"), {"table": table}).fetchall()
    return [name for (name,) in rows if name not in (*_KEY, "updated_at")]


def _statement(template: str, table: str, columns: Sequence[str]) -> sql.Composed:
    """``sql/<template>.sql`` for ``table``: its rows (``sql/<table>.sql``) as ``{body}``, its name and
    value columns."""

    def values(alias: str) -> sql.Composable:
        return sql.SQL(", ").join(sql.Identifier(alias, c) for c in columns)

    return sql.SQL(statement(template)).format(  # type: ignore[arg-type]  # our own file
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

    def add(self, other: RecomputeStats) -> None:
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
        statement("lock_pairs"),
        {"namespace": _LOCK_NAMESPACE, "cabinets": [c for c, _ in pairs], "days": [d for _, d in pairs]},
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
        statement("watermarks"),
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
                statement("fresh"), {"cabinets": [c for c, _ in pairs], "days": [d for _, d in pairs], "table": table}
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
    held = conn.execute(_statement("any_rows", table, columns), params).fetchone()
    if held is not None and not held[0]:
        rectangle = all(covered) and len(pairs) == len(cabinet_ids) * ((last - first).days + 1)
        inserted = conn.execute(_statement("fill_rectangle" if rectangle else "fill", table, columns), params).rowcount
        if stats.days_outside_partitions:
            dropped = conn.execute(_statement("uncovered", table, columns), params).fetchone()
            stats.rows_dropped = int(dropped[0]) if dropped else 0
        if table in ROLLUPS and inserted:
            conn.execute(statement("mart_stale_pairs"), done_params)
        conn.execute(statement("mark_recomputed"), done_params)
        stats.rows = stats.rows_changed = inserted
        return
    conn.execute("DROP TABLE IF EXISTS pg_temp.rnp_delta")
    conn.execute(
        sql.SQL("CREATE TEMP TABLE rnp_delta ON COMMIT DROP AS {}").format(_statement("delta", table, columns)), params
    )
    row = conn.execute(statement("delta_counts")).fetchone()
    assert row is not None
    to_update, to_insert, to_delete, stats.rows_dropped = (int(v) for v in row)
    for count, template in ((to_update, "update"), (to_insert, "insert"), (to_delete, "delete")):
        if count:
            conn.execute(_statement(template, table, columns), params)
    stats.rows_changed, stats.rows_removed = to_update + to_insert, to_delete
    if table in ROLLUPS and (to_update or to_insert or to_delete):
        conn.execute(statement("mart_stale"))
    conn.execute(statement("mark_recomputed"), done_params)
    counted = conn.execute(_statement("count_rows", table, columns), params).fetchone()
    assert counted is not None
    stats.rows = int(counted[0])


def refresh_statistics(conn: psycopg.Connection, tables: Sequence[str]) -> list[str]:
    """ANALYZE the tables that were never analyzed or changed by more than half since.

    Right after a bulk load (a new deployment's or a new cabinet's first import, which is exactly
    when its РНП is recomputed) autovacuum may not have run yet. Without statistics the planner
    takes the feed tables for tiny and joins report lines to orders by scanning the cabinet's
    lines once per order: minutes instead of a second (bench/rnp_recompute.py shows both)."""
    stale = [name for (name,) in conn.execute(statement("stale_statistics"), {"tables": list(tables)}).fetchall()]
    for name in stale:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
    return stale


def recompute_tables(
    connect: Connect, by_table: Mapping[str, Sequence[tuple[str, date]]], *, force: bool = False
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
    pairs fresh by their watermarks). ``connect`` opens a warehouse connection (``Warehouse.connect``:
    a session of the run's pool)."""
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
            with connect() as conn:
                work(conn)
        except BaseException as exc:  # could not connect
            failures.append(exc)

    with connect() as conn:
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
    connect: Connect, table: str, pairs: Sequence[tuple[str, date]], *, force: bool = False
) -> RecomputeStats:
    """One table's recompute_tables."""
    return recompute_tables(connect, {table: pairs}, force=force)[table]
