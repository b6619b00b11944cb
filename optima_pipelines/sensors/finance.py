"""Finance cadences: the nightly realization report (cron 0 5 * * *), and `import-user-report` requests."""

from __future__ import annotations

from typing import Any

import psycopg

from optima_pipelines.assets.finance import IMPORT_SPEC, finance_report_import_job, finance_sync_job, finance_sync_sweep
from optima_pipelines.errors import InvalidInput
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import Sweep, cron_fanout_schedule
from optima_pipelines.sync import finance
from optima_pipelines.sync.report_file import report_format
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import IMPORT_REPORT, Request

finance_sync_schedule = cron_fanout_schedule(
    "finance_sync_schedule",
    Sweep(finance_sync_sweep, finance_sync_job, finance.QUEUE),
    finance.STATE_FEED,
    "The realization report of the last 14 days",
)


def validate_report_request(conn: psycopg.Connection, request: Request) -> dict[str, Any]:
    """Run config for an import-user-report request, or InvalidInput/UnknownCabinet naming the problem.

    The file itself is read by the run (it is on a filesystem the run can read, not necessarily
    the sensor's): its problems fail the run, and so the request, with the row that is wrong."""
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    payload = request.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("path"), str) or not payload["path"].strip():
        raise InvalidInput('malformed payload: expected a JSON object with "path": "<the uploaded file>"')
    declared = payload.get("format")
    if declared is not None and not isinstance(declared, str):
        raise InvalidInput('malformed payload: "format" must be "xlsx" or "csv"')
    fmt = report_format(payload["path"], declared)
    return cabinet_run_config(
        IMPORT_SPEC.name, request.cabinet_id, path=payload["path"].strip(), format=fmt, request_id=request.id
    )


REQUEST_HANDLERS = [
    RequestHandler(IMPORT_REPORT, finance_report_import_job, finance.IMPORT_QUEUE, validate_report_request),
]
