"""Idempotent upserts: COPY into a temporary table, then one INSERT ... ON CONFLICT DO UPDATE.

Only rows whose values actually differ are updated, so re-running a load changes nothing (and
reports nothing changed). A row whose day changes (an order WB re-dates: same srid, another
``date``) is reported on both days: the day it reached (``updated_by_day``) and the day it left
(``left_by_day``), found by joining the staged rows with the table before the upsert (PostgreSQL
15 has no OLD in RETURNING). The caller owns the transaction: the staged rows, the merge and any
cursor update commit together, or not at all, so a run that dies midway leaves no partial rows.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import psycopg
from psycopg import sql

_stage_ids = itertools.count(1)
#: A merge that inserts at least this many rows refreshes the table's planner statistics at once
#: (ANALYZE reads a bounded sample of 30,000 rows, 0.1-0.3 s). Autovacuum gets there a minute or more
#: later, and until then the planner takes a cabinet it has never seen for an empty one: the finance
#: sync's next query, joining its report lines to that cabinet's orders, took 71 s instead of 20 ms
#: for the second cabinet of a fresh deployment (a nested loop over every order of the cabinet).
ANALYZE_AFTER_INSERTED = 5_000


@dataclass
class MergeResult:
    rows_staged: int = 0
    inserted: int = 0
    updated: int = 0
    #: Per business day (the table's day column): rows inserted, rows changed.
    inserted_by_day: Counter[date] = field(default_factory=Counter)
    updated_by_day: Counter[date] = field(default_factory=Counter)
    #: Per business day: rows that moved from it to another day (their update is counted on the new one).
    left_by_day: Counter[date] = field(default_factory=Counter)

    @property
    def changed_days(self) -> set[date]:
        return set(self.inserted_by_day) | set(self.updated_by_day) | set(self.left_by_day)

    @property
    def unchanged(self) -> int:
        return self.rows_staged - self.inserted - self.updated

    def __iadd__(self, other: MergeResult) -> MergeResult:
        self.rows_staged += other.rows_staged
        self.inserted += other.inserted
        self.updated += other.updated
        self.inserted_by_day.update(other.inserted_by_day)
        self.updated_by_day.update(other.updated_by_day)
        self.left_by_day.update(other.left_by_day)
        return self


def merge_rows(
    conn: psycopg.Connection,
    table: str,
    columns: Sequence[str],
    key: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    day_column: str | None = "day",
    run_id: str | None = None,
    derived: Mapping[str, sql.Composable] | None = None,
    on_insert: Mapping[str, Any] | None = None,
) -> MergeResult:
    """Upsert ``rows`` (tuples in ``columns`` order) into ``table`` keyed by ``key``.

    Duplicate keys within ``rows`` are allowed: the last one wins (WB repeats rows at page
    boundaries). Must run inside a transaction (``with conn.transaction():``). ``derived``: columns
    the INSERT computes from the staged row (an SQL expression over its columns as ``s.<column>``),
    written with it and not compared to tell whether a row changed. ``on_insert``: values of columns
    a new row gets and an updated one keeps (stocks' ``snapshot_at``: the sync's clock, which a replay
    sets to when WB answered).
    """
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and conn.autocommit:
        raise RuntimeError("merge_rows must run inside a transaction")
    stage = f"_stage_{table}_{next(_stage_ids)}"
    ident = sql.Identifier
    cols = sql.SQL(", ").join(map(ident, columns))
    keys = sql.SQL(", ").join(map(ident, key))
    # The staged columns only, without the table's constraints: the INSERT below checks those, and a
    # NOT NULL column the rows do not carry (a derived one, such as wb_report_lines.attributed_day) stays out.
    conn.execute(
        sql.SQL("CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA").format(
            ident(stage), cols, ident(table)
        )
    )
    staged = 0
    with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(ident(stage), cols)) as copy:
        for row in rows:
            copy.write_row(row)
            staged += 1
    if staged == 0:
        conn.execute(sql.SQL("DROP TABLE {}").format(ident(stage)))
        return MergeResult()

    non_key = [c for c in columns if c not in key]
    derived = dict(derived or {})
    first_only = dict(on_insert or {})
    set_clause = sql.SQL(", ").join(
        [sql.SQL("{0} = EXCLUDED.{0}").format(ident(c)) for c in [*non_key, *derived]]
        + [sql.SQL("loaded_at = now(), run_id = EXCLUDED.run_id")] * (run_id is not None)
    )
    distinct = sql.SQL("({}) IS DISTINCT FROM ({})").format(
        sql.SQL(", ").join(sql.SQL("{}.{}").format(ident(table), ident(c)) for c in non_key),
        sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(ident(c)) for c in non_key),
    )
    insert_cols = sql.SQL(", ").join(
        map(ident, [*columns, *derived, *first_only, *(["run_id"] if run_id is not None else [])])
    )
    select_cols = sql.SQL(", ").join(
        [
            *(sql.SQL("s.{}").format(ident(c)) for c in columns),
            *derived.values(),
            *(sql.Literal(v) for v in first_only.values()),
            *([sql.Literal(run_id)] if run_id is not None else []),
        ]
    )
    day = ident(day_column) if day_column else sql.SQL("NULL::date")
    result = MergeResult(rows_staged=staged)
    if day_column is not None and day_column not in key:
        # Rows whose day the merge changes: the day each leaves, read before the upsert rewrites it.
        moved = sql.SQL(
            "SELECT t.{day}, count(*) FROM (SELECT DISTINCT ON ({keys}) {keys}, {day} FROM {stage}"
            " ORDER BY {keys}, ctid DESC) AS s JOIN {table} AS t USING ({keys})"
            " WHERE t.{day} IS DISTINCT FROM s.{day} GROUP BY t.{day}"
        ).format(day=ident(day_column), keys=keys, stage=ident(stage), table=ident(table))
        for day_value, left in conn.execute(moved):
            if day_value is not None:
                result.left_by_day[day_value] = left
    # Duplicate keys within the load: the last row written (highest ctid) wins. The rows changed are
    # counted per day in SQL: returning one row per merged row to Python costs more than the count.
    query = sql.SQL(
        "WITH merged AS ("
        " INSERT INTO {table} ({insert_cols})"
        " SELECT DISTINCT ON ({keys}) {select_cols} FROM {stage} AS s ORDER BY {keys}, ctid DESC"
        " ON CONFLICT ({keys}) DO UPDATE SET {set_clause} WHERE {distinct}"
        " RETURNING (xmax = 0) AS inserted, {day} AS day) "
        "SELECT day, count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM merged GROUP BY day"
    ).format(
        table=ident(table),
        insert_cols=insert_cols,
        keys=keys,
        select_cols=select_cols,
        stage=ident(stage),
        set_clause=set_clause,
        distinct=distinct,
        day=day,
    )
    for day_value, inserted, updated in conn.execute(query):
        result.inserted += inserted
        result.updated += updated
        if day_value is not None:
            if inserted:
                result.inserted_by_day[day_value] = inserted
            if updated:
                result.updated_by_day[day_value] = updated
    conn.execute(sql.SQL("DROP TABLE {}").format(ident(stage)))
    if result.inserted >= ANALYZE_AFTER_INSERTED:
        conn.execute(sql.SQL("ANALYZE {}").format(ident(table)))
    return result
