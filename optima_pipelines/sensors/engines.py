"""Cadences of the engines: the autobidder's bid engine (60 s), the slot-booking monitor (12 s), A/B metrics (cron).

A queued run costs ~2 s of process start (DESIGN.md §4.13), so the two fast cadences never launch a
run per cabinet per tick:

- ``autobidder_bid_engine_sensor`` decides in the sensor, with one read-only query over the rules,
  the synced bids and the ad statistics and the same pure rule the run applies
  (engines/autobidder.py): it launches a run only for a cabinet with a bid to change, once per
  cabinet per minute (run key: job, cabinet, minute), never while one of that cabinet is queued or
  running. The run talks to WB, so it carries the cabinet gate tag.
- ``booking_slot_monitor`` launches no run at all: it reads the open tasks (one query), polls WB's
  acceptance coefficients with ONE request for the union of their warehouses, and records matches
  (engines/booking.py) itself. Why not a gated run: the poll would be the whole run, 300 runs an
  hour per cabinet (or per deployment) of ~2 s each for a ~50 ms read. Why this is safe outside
  the gate: the gate keeps two jobs of a cabinet from sharing that cabinet's WB buckets, and the
  coefficients method has a limit group of its own (6 a minute per seller) that no run uses;
  WB's coefficients are the same for every seller, so one request serves every cabinet's tasks,
  with the token of a cabinet that has an open task, taken in turn (a 12-s tick is 5 requests a
  minute per seller at most, each seller's share less). The request goes through the shared rate
  limiter, waits for nothing (a pause skips the tick), tries once with short timeouts, and any WB
  error is recorded on the monitor's state and the tasks while the sensor itself succeeds.
- ``ab_test_metrics_schedule``: one run per tick for every running test (no WB call, no gate),
  skipped when no test is running.
"""

from __future__ import annotations

import time

import psycopg
from dagster import (
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from optima_pipelines.assets.engines import AB_QUEUE, BID_QUEUE, ab_test_metrics_job, autobidder_bid_engine_job
from optima_pipelines.cadences import cadence
from optima_pipelines.engines import ab_tests, autobidder, booking
from optima_pipelines.errors import OptimaError
from optima_pipelines.fanout import busy_cabinets
from optima_pipelines.queues import PRIORITY_SCHEDULED, TAG_TRIGGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sensors.wb_sync import cabinet_request
from optima_pipelines.timeutil import MOSCOW, today_moscow
from optima_pipelines.wb import WbAuthError, WbError

_BID = cadence("autobidder_bid_engine_sensor")
_SLOTS = cadence("booking_slot_monitor")
_AB = cadence("ab_test_metrics_schedule")

#: The coefficients poll inside a sensor tick: one attempt, short timeouts, no waiting for the limiter.
POLL_CONFIG = {"max_attempts": 1, "connect_timeout": 3.0, "read_timeout": 5.0}


@sensor(
    name=_BID.name,
    job=autobidder_bid_engine_job,
    minimum_interval_seconds=_BID.interval_seconds or 60,
    default_status=DefaultSensorStatus.RUNNING,
    description="Every minute: launches the bid engine for each cabinet whose autobidder rules would change a bid "
    "now (decided here from the warehouse; no run for a cabinet with nothing to change).",
)
def autobidder_bid_engine_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    window = int(time.time() // (_BID.interval_seconds or 60))
    try:
        with warehouse.connect() as conn:
            now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            due = autobidder.due_cabinets(conn, now)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the autobidder rules: {exc.__class__.__name__}: {exc}")
    if not due:
        return SkipReason("no autobidder rule would change a bid now")
    busy = busy_cabinets(context.instance, autobidder_bid_engine_job.name)
    launch = sorted(c for c in due if c not in busy)
    if not launch:
        return SkipReason(f"{len(due)} cabinet(s) with a bid to change, each with a bid engine run in flight")
    job = autobidder_bid_engine_job
    return SensorResult(
        run_requests=[cabinet_request(job, BID_QUEUE, c, f"{job.name}:{c}:{window}", str(window)) for c in launch]
    )


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


@sensor(
    name=_SLOTS.name,
    minimum_interval_seconds=_SLOTS.interval_seconds or 12,
    default_status=DefaultSensorStatus.RUNNING,
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


@schedule(
    name=_AB.name,
    job=ab_test_metrics_job,
    cron_schedule=_AB.cadence,
    execution_timezone=_AB.timezone,
    default_status=DefaultScheduleStatus.RUNNING,
    description=f"A/B test metrics of every running test from the synced ads and funnel data (cron {_AB.cadence}, "
    f"{_AB.timezone}; skipped when no test is running).",
)
def ab_test_metrics_schedule(context: ScheduleEvaluationContext, warehouse: Warehouse):
    tick = context.scheduled_execution_time.astimezone(MOSCOW).strftime("%Y-%m-%dT%H:%M")
    try:
        with warehouse.connect() as conn:
            running = ab_tests.running_tests(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the A/B tests: {exc.__class__.__name__}: {exc}")
    if not running:
        return SkipReason(f"{tick}: no running A/B test")
    return RunRequest(
        run_key=f"{ab_test_metrics_job.name}:{tick}",
        tags={**queue_tags(AB_QUEUE, priority=PRIORITY_SCHEDULED), TAG_TRIGGER: "schedule", "optima/window": tick},
    )
