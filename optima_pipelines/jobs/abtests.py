"""The A/B test metrics job (queue ``ab-test-metrics``): every running test in one set-based
statement (engines/abtests.py); no WB call, so no cabinet gate. Its schedule is sensors/abtests.py."""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import OpExecutionContext, job, op

from optima_pipelines.engines import abtests
from optima_pipelines.orchestration.queues import AB_TEST_METRICS, queue_tags
from optima_pipelines.orchestration.retries import SCHEDULED_RETRY
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.timeutil import today_moscow

QUEUE = AB_TEST_METRICS


@op(
    name=op_name("ab_test_metrics"),
    retry_policy=SCHEDULED_RETRY,
    description="Recomputes the metrics of every variant of the running A/B tests.",
)
def ab_test_metrics_op(context: OpExecutionContext, warehouse: Warehouse):
    with warehouse.connect() as conn:
        rows = abtests.collect(conn, today_moscow())
        conn.commit()
    context.log.info(f"A/B test metrics: {rows} variant rows recomputed")


@job(
    name="ab_test_metrics",
    tags=queue_tags(QUEUE),
    description="A/B test metrics from the synced ads and funnel data (no WB call).",
)
def ab_test_metrics_job() -> None:
    ab_test_metrics_op()
