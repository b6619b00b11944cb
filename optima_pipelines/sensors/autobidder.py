"""The autobidder's cadences: `autobidder-sync` requests, and the bid engine's 60-s sensor.

- **Requests** (the original's 202 + jobId): the requests sensor launches one ``autobidder_sync``
  run per request within a tick; the run id is on the request row as soon as the run starts (and at
  the latest on the next tick), then its outcome.
- **The bid engine** never becomes a run per cabinet per minute (a queued run costs ~2 s of process
  start, DESIGN.md §4.13): ``autobidder_bid_engine_sensor`` decides in the sensor, with one
  read-only query over the rules, the synced bids and the ad statistics and the same pure rule the
  run applies (engines/autobidder.py), and launches a run only for a cabinet with a bid to change,
  once per cabinet per minute (run key: job, cabinet, minute), never while one of that cabinet is
  queued or running. The run talks to WB, so it carries the cabinet gate tag.
"""

from __future__ import annotations

import time

import psycopg
from dagster import SensorEvaluationContext, SensorResult, SkipReason

from optima_pipelines.engines import autobidder
from optima_pipelines.errors import OptimaError
from optima_pipelines.jobs.autobidder import (
    BID_QUEUE,
    QUEUE,
    autobidder_bid_engine_job,
    autobidder_bid_engine_sweep,
    autobidder_sync_job,
)
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.catalog import validate_cabinet_request
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import Sweep, sweep_busy, sweep_requests
from optima_pipelines.warehouse.requests import AUTOBIDDER_SYNC_KIND

REQUEST_HANDLERS = [
    RequestHandler(
        AUTOBIDDER_SYNC_KIND,
        autobidder_sync_job,
        QUEUE,
        lambda conn, request: validate_cabinet_request(conn, request, autobidder_sync_job.name),
    ),
]

_BID = cadence("autobidder_bid_engine_sensor")
BID_SWEEP = Sweep(autobidder_bid_engine_sweep, autobidder_bid_engine_job, BID_QUEUE)


@cadence_sensor(
    _BID,
    default_interval_seconds=60,
    job=autobidder_bid_engine_sweep,
    description="Every minute: one sweep of the bid engine over the cabinets whose autobidder rules would change a "
    "bid now (decided here from the warehouse; no run when no cabinet has anything to change).",
)
def autobidder_bid_engine_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    window = int(time.time() // (_BID.interval_seconds or 60))
    try:
        with warehouse.connect() as conn:
            now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            due = autobidder.due_cabinets(conn, now)
        if not due:
            return SkipReason("no autobidder rule would change a bid now")
        busy = sweep_busy(context.instance, warehouse, BID_SWEEP)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the autobidder rules: {exc.__class__.__name__}: {exc}")
    launch = sorted(c for c in due if c not in busy)
    if not launch:
        return SkipReason(f"{len(due)} cabinet(s) with a bid to change, each with a bid engine run in flight")
    return SensorResult(run_requests=sweep_requests(BID_SWEEP, _BID.name, launch, str(window)))
