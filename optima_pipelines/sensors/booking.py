"""The slot-booking monitor's 12-s sensor: it launches no run at all.

It reads the open tasks (one query), polls WB's acceptance coefficients with ONE request for the
union of their warehouses, and records matches (engines/booking.py) itself. Why not a gated run: the
poll would be the whole run, 300 runs an hour of ~2 s process start each (DESIGN.md §4.13) for a
~50 ms read. Why this is safe outside the cabinet gate: the gate keeps two jobs of a cabinet from
sharing that cabinet's WB buckets, and the coefficients method has a limit group of its own (6 a
minute per seller) that no run uses; WB's coefficients are the same for every seller, so one request
serves every cabinet's tasks, with the token of a cabinet that has an open task, taken in turn (a
12-s tick is 5 requests a minute, each seller's share less). The request goes through the shared
rate limiter, waits for nothing (a pause skips the tick), tries once with short timeouts, and any WB
error is recorded on the monitor's state and the tasks while the sensor itself succeeds.
"""

from __future__ import annotations

import psycopg
from dagster import SensorEvaluationContext, SkipReason

from optima_pipelines.engines import booking
from optima_pipelines.errors import OptimaError
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import WbAuthError, WbError

_SLOTS = cadence("booking_slot_monitor")

#: The coefficients poll inside a sensor tick: one attempt, short timeouts, no waiting for the limiter.
POLL_CONFIG = {"max_attempts": 1, "connect_timeout": 3.0, "read_timeout": 5.0}


def poll_coefficients(wb: WbApi, tasks: list[booking.Task], last_cabinet: str | None):
    """(coefficients or None, the cabinet whose token asked, the error) — one request, or two when
    the first token is refused (401/403: that cabinet's token, not WB's method)."""
    warehouses = booking.warehouses_of(tasks)
    used: str | None = None
    error: str | None = None
    for cabinet in booking.next_poller([t.cabinet_id for t in tasks], last_cabinet)[:2]:
        used = cabinet
        try:
            with wb.client(cabinet, max_wait_seconds=0.0, config_changes=dict(POLL_CONFIG)) as client:
                return client.acceptance_coefficients(warehouses), used, None
        except WbAuthError as exc:
            error = f"{exc.__class__.__name__}: {exc}"
            continue
        except (WbError, OptimaError) as exc:
            return None, used, f"{exc.__class__.__name__}: {exc}"
    return None, used, error


@cadence_sensor(
    _SLOTS,
    default_interval_seconds=12,
    description="Every 12 s: one poll of WB's acceptance coefficients for the open booking tasks; a matching slot "
    "marks its task matched, once (booking_matches, engine_actions). WB errors are recorded, not raised.",
)
def booking_slot_monitor(context: SensorEvaluationContext, warehouse: Warehouse, wb: WbApi):
    try:
        with warehouse.connect() as conn:
            expired = booking.expire_tasks(conn, today_moscow())
            conn.commit()
            tasks = booking.open_tasks(conn)
            last = booking.monitor_state(conn).last_cabinet_id if tasks else None
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the booking tasks: {exc.__class__.__name__}: {exc}")
    if not tasks:
        return SkipReason("no open booking task" + (f" ({expired} expired)" if expired else ""))
    coefficients, used, error = poll_coefficients(wb, tasks, last)
    try:
        with warehouse.connect() as conn:
            booking.record_poll(conn, tasks, cabinet_id=used, error=error)
            if coefficients is None:
                conn.commit()
                context.log.warning(f"acceptance coefficients unavailable: {error}")
                return SkipReason(f"WB's acceptance coefficients unavailable ({error}); the next tick tries again")
            slots = [booking.Slot.of(c) for c in coefficients]
            matched = []
            for task in tasks:
                slot = booking.find_slot(task, slots)
                if slot is not None and booking.record_match(conn, task, slot, polled_with=used):
                    matched.append(f"task {task.id}: {slot.warehouse_name} {slot.day.isoformat()}")
            conn.commit()
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not record the poll: {exc.__class__.__name__}: {exc}")
    if matched:
        context.log.info(f"booking slots matched: {matched}")
    return SkipReason(f"{len(tasks)} open task(s), {len(slots)} slots polled, matched: {matched or 'none'}")
