"""`autobidder-sync` requests: the cabinet's ad data on demand, at user priority (the original's 202 + jobId).

The requests sensor launches one ``autobidder_sync`` run per request within a tick; the run id is on
the request row as soon as the run starts (and at the latest on the next tick), then its outcome.
"""

from __future__ import annotations

from optima_pipelines.assets.autobidder import QUEUE, autobidder_sync_job
from optima_pipelines.sensors.catalog import validate_cabinet_request
from optima_pipelines.sensors.handlers import RequestHandler

REQUEST_HANDLERS = [
    RequestHandler(
        "autobidder-sync",
        autobidder_sync_job,
        QUEUE,
        lambda conn, request: validate_cabinet_request(conn, request, autobidder_sync_job.name),
    ),
]
