"""The slot-booking monitor: open booking tasks, WB's acceptance coefficients, and a match recorded once.

**The rule, in words** (``find_slot``, pure): a slot matches a task when it is on one of the task's
warehouses, on a day of its date range, for its box type (any, if the task names none), unloading
is allowed, and the acceptance coefficient is open (≥ 0) and at most the task's maximum (0: free
acceptance only). Of several matching slots the earliest day wins, then the lowest coefficient,
then the warehouse the seller listed first.

**Exactly once**: ``record_match`` inserts the match (``booking_matches.task_id`` is unique), marks
the task ``matched`` only if it is still ``open``, and writes the audit row with the intent
``match:<task id>``, all in one transaction: two monitors seeing the same slot at once record one
match, and a task already matched is never matched again.

**WB errors**: the coefficients method may be switched off (WB marked it "temporarily disabled" in
August 2026) or fail; ``record_poll`` keeps the error, the time and the count of consecutive
failures in ``booking_monitor_state`` (every poll) and on the open tasks (``last_error``, and
``last_checked_at`` at most once a minute), and the next tick tries again. Tasks whose date range
is over are closed as ``expired``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg

from optima_pipelines.engines.audit import record_action
from optima_pipelines.wb import AcceptanceCoefficient

ENGINE = "booking"


@dataclass(frozen=True)
class Task:
    id: int
    cabinet_id: str
    warehouse_ids: tuple[int, ...]
    date_from: date
    date_to: date
    max_coefficient: Decimal
    box_type_id: int | None


@dataclass(frozen=True)
class Slot:
    warehouse_id: int
    warehouse_name: str
    day: date
    box_type_id: int | None
    coefficient: Decimal
    allow_unload: bool

    @classmethod
    def of(cls, c: AcceptanceCoefficient) -> Slot:
        return cls(
            c.warehouse_id, c.warehouse_name, c.date.date(), c.box_type_id, Decimal(c.coefficient), c.allow_unload
        )

    def describe(self) -> dict[str, Any]:
        return {
            "warehouse_id": self.warehouse_id,
            "warehouse_name": self.warehouse_name,
            "date": self.day.isoformat(),
            "box_type_id": self.box_type_id,
            "coefficient": str(self.coefficient),
            "allow_unload": self.allow_unload,
        }


def slot_matches(task: Task, slot: Slot) -> bool:
    return (
        slot.warehouse_id in task.warehouse_ids
        and task.date_from <= slot.day <= task.date_to
        and (task.box_type_id is None or slot.box_type_id == task.box_type_id)
        and slot.allow_unload
        and Decimal(0) <= slot.coefficient <= task.max_coefficient
    )


def find_slot(task: Task, slots: Iterable[Slot]) -> Slot | None:
    """The slot the task takes, or None (see the module docstring). Pure."""
    order = {w: i for i, w in enumerate(task.warehouse_ids)}
    matching = [s for s in slots if slot_matches(task, s)]
    if not matching:
        return None
    return min(matching, key=lambda s: (s.day, s.coefficient, order[s.warehouse_id], s.box_type_id or 0))


def expire_tasks(conn: psycopg.Connection, today: date) -> int:
    """Close the open tasks whose date range is over; how many."""
    cur = conn.execute(
        "UPDATE booking_tasks SET status = 'expired', updated_at = now() WHERE status = 'open' AND date_to < %s",
        (today,),
    )
    return cur.rowcount


def open_tasks(conn: psycopg.Connection) -> list[Task]:
    """Open tasks of active cabinets, oldest first (one indexed query: what the 12-s sensor reads)."""
    rows = conn.execute(
        "SELECT t.id, t.cabinet_id, t.warehouse_ids, t.date_from, t.date_to, t.max_coefficient, t.box_type_id"
        " FROM booking_tasks t JOIN cabinets c ON c.id = t.cabinet_id AND c.status = 'active'"
        " WHERE t.status = 'open' ORDER BY t.id"
    ).fetchall()
    return [Task(r[0], r[1], tuple(int(w) for w in r[2]), r[3], r[4], Decimal(r[5]), r[6]) for r in rows]


def warehouses_of(tasks: Sequence[Task]) -> list[int]:
    return sorted({w for t in tasks for w in t.warehouse_ids})


def record_match(conn: psycopg.Connection, task: Task, slot: Slot, *, polled_with: str | None) -> bool:
    """Record that ``task`` took ``slot``, once: False if the task was matched (or closed) already."""
    with conn.transaction():
        row = conn.execute(
            "INSERT INTO booking_matches (task_id, cabinet_id, warehouse_id, warehouse_name, slot_date, box_type_id,"
            " coefficient, polled_with) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (task_id) DO NOTHING RETURNING id",
            (
                task.id,
                task.cabinet_id,
                slot.warehouse_id,
                slot.warehouse_name,
                slot.day,
                slot.box_type_id,
                slot.coefficient,
                polled_with,
            ),
        ).fetchone()
        if row is None:
            return False
        updated = conn.execute(
            "UPDATE booking_tasks SET status = 'matched', matched_at = now(), updated_at = now(), last_error = NULL"
            " WHERE id = %s AND status = 'open'",
            (task.id,),
        ).rowcount
        if updated != 1:  # cancelled or expired in the meantime: no match after all
            conn.execute("DELETE FROM booking_matches WHERE id = %s", (row[0],))
            return False
        coefficient = "free" if slot.coefficient == 0 else f"coefficient {slot.coefficient}"
        record_action(
            conn,
            cabinet_id=task.cabinet_id,
            engine=ENGINE,
            action="match_slot",
            target=f"task:{task.id}",
            reason=f"{slot.warehouse_name} on {slot.day.isoformat()} is open for acceptance ({coefficient}, the task"
            f" accepts up to {task.max_coefficient})",
            status="ok",
            request={
                "warehouse_ids": list(task.warehouse_ids),
                "date_from": task.date_from.isoformat(),
                "date_to": task.date_to.isoformat(),
                "max_coefficient": str(task.max_coefficient),
                "box_type_id": task.box_type_id,
            },
            response=slot.describe(),
            intent_id=f"match:{task.id}",
        )
    return True


def record_poll(conn: psycopg.Connection, tasks: Sequence[Task], *, cabinet_id: str | None, error: str | None) -> None:
    """The outcome of one poll of WB's coefficients, on the monitor's state and on the tasks."""
    with conn.transaction():
        if error is None:
            conn.execute(
                "UPDATE booking_monitor_state SET last_poll_at = now(), last_ok_at = now(), last_error = NULL,"
                " consecutive_errors = 0, last_cabinet_id = %s",
                (cabinet_id,),
            )
        else:
            conn.execute(
                "UPDATE booking_monitor_state SET last_poll_at = now(), last_error = %s,"
                " consecutive_errors = consecutive_errors + 1, last_cabinet_id = %s",
                (error, cabinet_id),
            )
        # A task row changes when its error does, else at most once a minute (not at every 12-s tick).
        conn.execute(
            "UPDATE booking_tasks SET last_checked_at = now(), last_error = %(error)s"
            " WHERE id = ANY(%(ids)s) AND status = 'open' AND (last_error IS DISTINCT FROM %(error)s"
            " OR last_checked_at IS NULL OR last_checked_at < now() - interval '1 minute')",
            {"error": error, "ids": [t.id for t in tasks]},
        )


@dataclass(frozen=True)
class MonitorState:
    last_poll_at: Any
    last_ok_at: Any
    last_error: str | None
    consecutive_errors: int
    last_cabinet_id: str | None


def monitor_state(conn: psycopg.Connection) -> MonitorState:
    row = conn.execute(
        "SELECT last_poll_at, last_ok_at, last_error, consecutive_errors, last_cabinet_id FROM booking_monitor_state"
    ).fetchone()
    assert row is not None
    return MonitorState(*row)


def next_poller(cabinets: Sequence[str], last: str | None) -> list[str]:
    """The cabinets whose token reads the coefficients this tick, in order of preference: the one
    after the last used (the per-seller limit is shared out), then the others. Pure."""
    ordered = sorted(set(cabinets))
    if not ordered:
        return []
    start = 0
    if last is not None:
        start = next((i for i, c in enumerate(ordered) if c > last), 0)
    return ordered[start:] + ordered[:start]
