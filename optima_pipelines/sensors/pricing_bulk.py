"""pricing-bulk requests: validated in the requests sensor (cheap), served by the ``pricing_bulk`` job."""

from __future__ import annotations

from typing import Any

import psycopg

from optima_pipelines.engines import pricing_bulk
from optima_pipelines.errors import InvalidInput
from optima_pipelines.jobs.pricing_bulk import pricing_bulk_job
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import Request


def validate(conn: psycopg.Connection, request: Request) -> dict[str, Any]:
    """The cabinet exists and the payload is a list of at most 100,000 items; each item is checked
    by the run (a bad item is reported, not the whole request)."""
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    pricing_bulk.check_payload(request.payload)
    return cabinet_run_config(pricing_bulk_job.name, request.cabinet_id, request_id=request.id)


REQUEST_HANDLERS = [RequestHandler(pricing_bulk.KIND, pricing_bulk_job, pricing_bulk.QUEUE, validate)]
