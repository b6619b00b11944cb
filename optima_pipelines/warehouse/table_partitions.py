"""The monthly range partitions of rnp_daily and its rollups, Dagster-free: what is attached
(the PostgreSQL catalog), which days a partition takes, and the plan that keeps them (create three
months ahead, drop beyond the retention horizon).

jobs/partition_manager.py runs the plan weekly; assets/rnp.py and sensors/rnp.py ask which days have
a partition (rows for a day without one are dropped and counted, never an error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

import psycopg
from psycopg import sql

from optima_pipelines.errors import OptimaError

#: Tables kept in monthly partitions. All four are the same size (one row per cabinet × day × nm_id).
MANAGED_TABLES = ("rnp_sales", "rnp_ads", "rnp_finance", "rnp_daily")

MONTHS_AHEAD = 3

_RANGE_BOUND = re.compile(r"^FOR VALUES FROM \((?P<start>[^)]*)\) TO \((?P<end>[^)]*)\)$")


class PartitionBoundError(OptimaError):
    """A partition whose bounds are not a single date range (someone attached something else)."""


@dataclass(frozen=True)
class TablePartition:
    """One attached partition. ``start``/``end`` are None for MINVALUE/MAXVALUE and for DEFAULT."""

    name: str
    start: date | None
    end: date | None
    is_default: bool = False

    def covers(self, day: date) -> bool:
        if self.is_default:
            return True
        return (self.start is None or self.start <= day) and (self.end is None or day < self.end)

    def overlaps(self, start: date, end: date) -> bool:
        if self.is_default:
            return False  # a DEFAULT partition takes what no range partition takes
        return (self.start is None or self.start < end) and (self.end is None or start < self.end)


def _bound_value(text: str, partition: str, expr: str) -> date | None:
    value = text.strip()
    if value in ("MINVALUE", "MAXVALUE"):
        return None
    try:
        return date.fromisoformat(value.strip("'"))
    except ValueError:
        raise PartitionBoundError(f"partition {partition}: bound {expr!r} is not a date range") from None


def parse_partition_bound(name: str, expr: str) -> TablePartition:
    """A TablePartition from ``pg_get_expr(relpartbound)`` text, e.g. ``FOR VALUES FROM ('2026-01-01') TO (...)``."""
    if expr.strip() == "DEFAULT":
        return TablePartition(name, None, None, is_default=True)
    match = _RANGE_BOUND.match(expr.strip())
    if match is None:
        raise PartitionBoundError(f"partition {name}: bound {expr!r} is not a date range")
    return TablePartition(name, _bound_value(match["start"], name, expr), _bound_value(match["end"], name, expr))


def list_partitions(conn: psycopg.Connection, table: str) -> list[TablePartition]:
    """The partitions attached to ``table`` (in the connection's search path), by start."""
    rows = conn.execute(
        """
        SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = to_regclass(%s)
        """,
        (table,),
    ).fetchall()
    parts = [parse_partition_bound(name, expr) for name, expr in rows]
    return sorted(parts, key=lambda p: (p.is_default, p.start or date.min))


def covered_days(partitions: Sequence[TablePartition], days: Iterable[date]) -> list[bool]:
    """For each day, whether some partition takes its rows."""
    return [any(p.covers(d) for p in partitions) for d in days]


def add_months(first_of_month: date, months: int) -> date:
    index = first_of_month.year * 12 + first_of_month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def partition_name(table: str, month: date) -> str:
    return f"{table}_p{month:%Y%m}"


@dataclass(frozen=True)
class PartitionPlan:
    table: str
    #: First day kept: partitions ending on or before it are dropped.
    horizon: date
    create: tuple[tuple[str, date, date], ...] = field(default=())
    drop: tuple[str, ...] = field(default=())


def plan_partitions(
    table: str,
    existing: Sequence[TablePartition],
    today: date,
    *,
    retention_months: int,
    months_ahead: int = MONTHS_AHEAD,
) -> PartitionPlan:
    """Months from the horizon to ``months_ahead`` after today's month that need a partition, and
    the partitions wholly older than the horizon. A month that an existing partition already
    overlaps (one of ours, or one an operator attached) is left alone."""
    this_month = today.replace(day=1)
    horizon = add_months(this_month, -retention_months)
    create = []
    month = horizon
    last = add_months(this_month, months_ahead)
    while month <= last:
        end = add_months(month, 1)
        if not any(p.overlaps(month, end) for p in existing):
            create.append((partition_name(table, month), month, end))
        month = end
    drop = [p.name for p in existing if not p.is_default and p.end is not None and p.end <= horizon]
    return PartitionPlan(table=table, horizon=horizon, create=tuple(create), drop=tuple(drop))


def apply_plan(conn: psycopg.Connection, plan: PartitionPlan) -> None:
    """Run a plan. DDL takes no bind parameters: the bounds are composed as SQL literals."""
    for name, start, end in plan.create:
        conn.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})").format(
                sql.Identifier(name), sql.Identifier(plan.table), sql.Literal(start), sql.Literal(end)
            )
        )
    for name in plan.drop:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
    if plan.drop:
        # Their РНП rows are gone: a recompute of those days must not take them for up to date.
        conn.execute("DELETE FROM rnp_watermarks WHERE table_name = %s AND day < %s", (plan.table, plan.horizon))
