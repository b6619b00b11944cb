"""autoreply-sync and autoreply-answer-send: review auto-replies (engines/autoreply.py).

- ``autoreply_sync``: every 15 minutes, a sweep over the cabinets with reply rules
  (jobs/wb_sync.py): load WB's unanswered feedbacks and questions, close those answered
  elsewhere, match the rules, record complaints, and send the answers (those WB's transient
  errors stop become ``autoreply-answer-send`` requests).
- ``autoreply_answer_send``: one answer, served from its request: 5 attempts with exponential
  backoff on WB's transient errors, checked at WB before every send; a permanent failure ends the
  request and the item ``failed`` with the reason.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import Config, Failure, OpExecutionContext, job, op

from optima_pipelines.engines import autoreply
from optima_pipelines.jobs.engine_runs import start_request
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, locked_client, sweep_job
from optima_pipelines.orchestration.queues import PRIORITY_USER, queue_tags
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, fail_on_permanent, is_transient
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import get_cabinet

SYNC_JOB = "autoreply_sync"
SEND_JOB = "autoreply_answer_send"


class AnswerSendConfig(Config):
    cabinet_id: str
    request_id: int


SYNC_SPEC = SyncJobSpec(
    name=SYNC_JOB,
    queue=autoreply.SYNC_QUEUE,
    feeds=(),
    body=autoreply.sync_cabinet,
    description="autoreply-sync: a cabinet's new feedbacks and questions, reconciled with WB, answered by its rules "
    "(an answer WB fails transiently becomes an autoreply-answer-send request), complaints recorded.",
)
#: One cabinet (the Launchpad, a retry); the sensor sweeps every cabinet with reply rules.
autoreply_sync_job = cabinet_sync_job(SYNC_SPEC)
autoreply_sync_sweep = sweep_job(SYNC_SPEC)


@op(
    name=op_name(SEND_JOB),
    retry_policy=DEFAULT_RETRY,
    description="Send one answer to WB, checked at WB first; never twice.",
)
def autoreply_answer_send_op(
    context: OpExecutionContext, config: AnswerSendConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    cabinet_id = config.cabinet_id
    target: autoreply.SendTarget | None = None
    with warehouse.connect() as conn:
        try:
            get_cabinet(conn, cabinet_id)
            target = autoreply.check_send_payload(start_request(conn, config.request_id, cabinet_id, context.run_id))
            with locked_client(warehouse, wb, cabinet_id) as client:
                outcome = autoreply.send_answer(conn, client, cabinet_id, target, context.run_id)
        except autoreply.AnswerFailed as failed:
            outbox.mark_failed(conn, config.request_id, failed.reason, context.run_id)
            conn.commit()
            raise Failure(description=f"answer to {cabinet_id}: {failed.reason}", allow_retries=False) from None
        except Exception as exc:
            last = context.retry_number >= (DEFAULT_RETRY.max_retries or 0)
            if is_transient(exc) and last and target is not None:
                reason = f"gave up after {context.retry_number + 1} attempts: {exc}"
                autoreply.fail_item(conn, cabinet_id, target.item_id, reason)
            fail_on_permanent(exc, f"answer of cabinet {cabinet_id}")
            raise
        outbox.mark_succeeded(conn, config.request_id, context.run_id, {"outcome": outcome, "item_id": target.item_id})  # type: ignore[union-attr]
        conn.commit()
    context.log.info(f"answer {target.kind} {target.item_id} of {cabinet_id}: {outcome}")  # type: ignore[union-attr]


@job(
    name=SEND_JOB,
    tags=queue_tags(autoreply.SEND_QUEUE, priority=PRIORITY_USER),
    description="autoreply-answer-send: one answer to a feedback or question (5 attempts, exponential backoff), "
    "idempotent by its intent and a check at WB.",
)
def autoreply_answer_send_job() -> None:
    autoreply_answer_send_op()
