"""pricing-bulk: one request's price changes, in WB upload tasks of ≤ 1000 (engines/pricing_bulk.py).

Launched by the requests sensor for a request of kind ``pricing-bulk`` (user priority, the
cabinet's gate). The payload stays in the requests table (tens of thousands of items do not belong
in run config); per-item results go to ``pricing_bulk_items``, a summary to the request's result.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import Config, OpExecutionContext, job, op

from optima_pipelines.engines import pricing_bulk
from optima_pipelines.jobs.engine_runs import start_request
from optima_pipelines.jobs.wb_sync import locked_client
from optima_pipelines.orchestration.queues import PRIORITY_USER, queue_tags
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, INTERACTIVE_MAX_WAIT_SECONDS, fail_on_permanent
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import get_cabinet

JOB = "pricing_bulk"


class PricingBulkConfig(Config):
    cabinet_id: str
    request_id: int


@op(
    name=op_name(JOB),
    retry_policy=DEFAULT_RETRY,
    description="Send a pricing-bulk request's chunks that have no result yet; poll each task to its final status.",
)
def pricing_bulk_op(context: OpExecutionContext, config: PricingBulkConfig, warehouse: Warehouse, wb: WbApi) -> None:
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, config.cabinet_id)
            payload = start_request(conn, config.request_id, config.cabinet_id, context.run_id)
            with locked_client(warehouse, wb, config.cabinet_id, INTERACTIVE_MAX_WAIT_SECONDS) as client:
                result = pricing_bulk.run_bulk(
                    conn, client, config.cabinet_id, config.request_id, payload, context.run_id
                )
            outbox.mark_succeeded(conn, config.request_id, context.run_id, result)
            conn.commit()
    except Exception as exc:
        fail_on_permanent(exc, f"pricing-bulk request {config.request_id} of cabinet {config.cabinet_id}")
        raise
    context.log.info(
        f"pricing-bulk request {config.request_id}: {result['ok']} ok, {result['failed']} failed, "
        f"{result['invalid']} invalid, uploads {result['upload_ids']}"
    )


@job(
    name=JOB,
    tags=queue_tags(pricing_bulk.QUEUE, priority=PRIORITY_USER),
    description="pricing-bulk: a request's price changes through WB's upload tasks (≤ 1000 each), with per-item "
    "results; a re-run sends only the chunks without results.",
)
def pricing_bulk_job() -> None:
    pricing_bulk_op()
