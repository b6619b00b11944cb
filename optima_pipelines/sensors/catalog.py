"""Catalog cadences: cards nightly (cron 0 4 * * *), prices every 30 minutes, and `catalog-sync` requests
(the original's full cabinet sync on demand)."""

from __future__ import annotations

from typing import Any

import psycopg

from optima_pipelines.assets.catalog import (
    catalog_cards_job,
    catalog_cards_sweep,
    catalog_full_job,
    catalog_prices_job,
    catalog_prices_sweep,
)
from optima_pipelines.errors import InvalidInput
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.sensors.wb_sync import Sweep, cron_fanout_schedule, interval_fanout_sensor
from optima_pipelines.sync import catalog
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.warehouse.requests import CATALOG_SYNC_KIND, Request

catalog_cards_schedule = cron_fanout_schedule(
    "catalog_cards_schedule",
    Sweep(catalog_cards_sweep, catalog_cards_job, catalog.QUEUE),
    catalog.CARDS_STATE_FEED,
    "Product cards",
)
catalog_prices_sensor = interval_fanout_sensor(
    "catalog_prices_sensor",
    Sweep(catalog_prices_sweep, catalog_prices_job, catalog.QUEUE),
    catalog.PRICES_STATE_FEED,
    "Current prices and the price history they add",
)


def validate_cabinet_request(conn: psycopg.Connection, request: Request, job_name: str) -> dict[str, Any]:
    """Run config of an on-demand sync of one cabinet: the cabinet must exist; there is no payload."""
    if not request.cabinet_id:
        raise InvalidInput("the request names no cabinet")
    get_cabinet(conn, request.cabinet_id)
    if request.payload not in (None, {}) and not isinstance(request.payload, dict):
        raise InvalidInput("malformed payload: expected nothing, or an empty JSON object")
    return cabinet_run_config(job_name, request.cabinet_id, request_id=request.id)


REQUEST_HANDLERS = [
    RequestHandler(
        CATALOG_SYNC_KIND,
        catalog_full_job,
        catalog.QUEUE,
        lambda conn, request: validate_cabinet_request(conn, request, catalog_full_job.name),
    ),
]
