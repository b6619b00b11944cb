"""example-jobs: the house pattern in one small, complete piece, for the next engineer to copy.

The pattern: a typed resource parameter (never ``context.resources``), set-based SQL in the
warehouse, an idempotent write inside one transaction, a ``MaterializeResult`` with the numbers a
person wants to see in the UI, a job and a schedule declared in the cadence registry, and a test in
``tests/dagster/test_example.py``.
"""

from __future__ import annotations

from dagster import MaterializeResult, MetadataValue, asset, define_asset_job

from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import EXAMPLE_JOBS, queue_tags
from optima_pipelines.resources.warehouse import Warehouse

# Our own logger, not context.log: its lines carry run_id and cabinet (optima_pipelines.logs binds
# them from the running step by itself), reach the run's event log (dagster.yaml's python_logs) and
# pass the token redaction.
logger = get_logger(__name__)


@asset(
    group_name="examples",
    kinds={"postgres"},
    description=None,  # the docstring is the description shown in the UI
)
def cabinet_status_summary(warehouse: Warehouse) -> MaterializeResult:
    """How many cabinets are in each status. A template asset: copy its shape, not its purpose."""
    with warehouse.connect() as conn:
        rows = conn.execute("SELECT status, count(*) FROM cabinets GROUP BY status ORDER BY status").fetchall()
    counts = {status: int(n) for status, n in rows}
    logger.info("cabinets by status: %s", counts)
    return MaterializeResult(
        metadata={
            "cabinets": sum(counts.values()),
            "active": counts.get("active", 0),
            "by_status": MetadataValue.json(counts),
        }
    )


#: The job a schedule launches (``sensors/example.py``); its tags put its runs in their queue.
cabinet_status_summary_job = define_asset_job(
    "cabinet_status_summary_job",
    selection=[cabinet_status_summary],
    tags=queue_tags(EXAMPLE_JOBS),
    description="The template job: materializes cabinet_status_summary.",
)
