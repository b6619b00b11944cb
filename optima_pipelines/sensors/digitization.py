"""Digitization cadences: the increment (interval sensor), the nightly backfill (schedule), user feed imports.

Both cadences are the WB syncs' own fan-out (sensors/wb_sync.py); a load WB paused (or that yielded
the cabinet to a user's run) is launched again by ``wb_sync_resume_sensor``, as an increment.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg

from optima_pipelines.assets.digitization import (
    QUEUE,
    digitization_backfill_job,
    digitization_backfill_sweep,
    digitization_import_job,
    digitization_increment_job,
    digitization_increment_sweep,
)
from optima_pipelines.errors import InvalidInput
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import Sweep, cron_fanout_schedule, interval_fanout_sensor
from optima_pipelines.sync.digitization import ORDERS, SALES, check_date_from
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import IMPORT_FEEDS, Request

digitization_increment_sensor = interval_fanout_sensor(
    "digitization_increment_sensor",
    Sweep(digitization_increment_sweep, digitization_increment_job, QUEUE),
    (ORDERS.name, SALES.name),
    "The orders/sales increment: WB's change feed from the stored cursor",
)
# A cabinet whose increment WB paused still gets its nightly backfill: no state feed holds it back.
digitization_backfill_schedule = cron_fanout_schedule(
    "digitization_backfill_schedule",
    Sweep(digitization_backfill_sweep, digitization_backfill_job, QUEUE),
    (),
    "Nightly: WB's change feed over the last 90 days, one request per WB page",
)


# -- import-user-feeds requests -------------------------------------------------------------------


def validate_import_request(conn: psycopg.Connection, request: Request, today: date | None = None) -> dict[str, Any]:
    """Run config for an import-user-feeds request, or InvalidInput/UnknownCabinet naming the problem."""
    today = today or today_moscow()
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    payload = request.payload
    date_from = check_date_from(payload.get("dateFrom") if isinstance(payload, dict) else None, today)
    return cabinet_run_config(
        digitization_import_job.name, request.cabinet_id, date_from=date_from.isoformat(), request_id=request.id
    )


REQUEST_HANDLERS = [
    RequestHandler(IMPORT_FEEDS, digitization_import_job, QUEUE, validate_import_request),
]
