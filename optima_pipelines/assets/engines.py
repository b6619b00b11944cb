"""Jobs of the engines built on the ad and funnel data: the autobidder's bid engine and the A/B test metrics.

- ``autobidder_bid_engine`` (queue ``autobidder-bid-engine``): one cabinet's bids
  (engines/autobidder.py ``apply_bids``). Launched by its 60-s sensor only for a cabinet with a bid
  to change, with the cabinet gate tag; every bid sent is first recorded in ``engine_actions``
  with an intent id, so the retry policy never sends a confirmed bid twice. A WB pause beyond the
  client's wait ends the run without a change: the next tick decides again.
- ``ab_test_metrics`` (queue ``ab-test-metrics``): every running A/B test in one set-based
  statement (engines/ab_tests.py); no WB call, so no cabinet gate.

The slot-booking monitor has no job: its sensor does its work (sensors/engines.py says why).
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import Config, OpExecutionContext, job, op

from optima_pipelines.engines import ab_tests, autobidder
from optima_pipelines.queues import queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.retries import SCHEDULED_RETRY, fail_on_permanent
from optima_pipelines.runconfig import op_name
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import WbDeferred

BID_QUEUE = "autobidder-bid-engine"
AB_QUEUE = "ab-test-metrics"


class BidEngineConfig(Config):
    cabinet_id: str


@op(
    name=op_name("autobidder_bid_engine"),
    retry_policy=SCHEDULED_RETRY,
    description="Sets the bids the cabinet's autobidder rules call for (one PATCH of every change).",
)
def autobidder_bid_engine_op(context: OpExecutionContext, config: BidEngineConfig, warehouse: Warehouse, wb: WbApi):
    try:
        with wb.client(config.cabinet_id) as client:
            result = autobidder.apply_bids(warehouse.connect, client, config.cabinet_id, run_id=context.run_id)
    except WbDeferred as deferred:
        context.log.info(f"bid engine of {config.cabinet_id} paused by WB ({deferred}): the next tick decides again")
        return
    except Exception as exc:
        fail_on_permanent(exc, f"bid engine of cabinet {config.cabinet_id}")
        raise
    context.log.info(f"bid engine of {config.cabinet_id}: {result.summary()}")
    if result.refused:
        context.log.warning(f"WB refused bids of {config.cabinet_id} (recorded on the rules): {result.refused}")


@job(
    name="autobidder_bid_engine",
    tags=queue_tags(BID_QUEUE),
    description="The autobidder's bid engine for one cabinet: new bids from its rules and the latest ad statistics.",
)
def autobidder_bid_engine_job() -> None:
    autobidder_bid_engine_op()


@op(
    name=op_name("ab_test_metrics"),
    retry_policy=SCHEDULED_RETRY,
    description="Recomputes the metrics of every variant of the running A/B tests.",
)
def ab_test_metrics_op(context: OpExecutionContext, warehouse: Warehouse):
    with warehouse.connect() as conn:
        rows = ab_tests.collect(conn, today_moscow())
        conn.commit()
    context.log.info(f"A/B test metrics: {rows} variant rows recomputed")


@job(
    name="ab_test_metrics",
    tags=queue_tags(AB_QUEUE),
    description="A/B test metrics from the synced ads and funnel data (no WB call).",
)
def ab_test_metrics_job() -> None:
    ab_test_metrics_op()
