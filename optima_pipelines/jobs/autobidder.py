"""The autobidder: the on-demand sync (`autobidder-sync` queue) and the bid engine (`autobidder-bid-engine`).

**The on-demand sync** (the original's POST /autobidder/sync → 202 + jobId):

A request of kind ``autobidder-sync`` (sensors/autobidder.py) runs ``autobidder_sync`` for its
cabinet at user priority, in a queue of its own so that it never waits behind the scheduled ads
backlog: the cabinet's campaigns with their current bids, then the ad statistics of the last three
days, waiting out WB's fullstats pace (one request per 20 s) rather than deferring. The request
row gets the run id as soon as the run starts.

**The bid engine** (``autobidder_bid_engine``): one cabinet's bids (engines/autobidder.py
``apply_bids``). Launched by its 60-s sensor (sensors/autobidder.py) only for a cabinet with a bid to
change, with the cabinet gate tag; every bid sent is first recorded in ``engine_actions`` with an
intent id, so the retry policy never sends a confirmed bid twice. A WB pause beyond the client's
wait ends the run without a change: the next tick decides again.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from dagster import Config, OpExecutionContext, job, op

from optima_pipelines.engines import autobidder
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, locked_client
from optima_pipelines.orchestration.queues import AUTOBIDDER_BID_ENGINE, AUTOBIDDER_SYNC, queue_tags
from optima_pipelines.orchestration.retries import SCHEDULED_RETRY, fail_on_permanent
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncInput, SyncRun
from optima_pipelines.wb import WbDeferred

QUEUE = AUTOBIDDER_SYNC
BID_QUEUE = AUTOBIDDER_BID_ENGINE


def _on_demand(inp: SyncInput) -> list[SyncRun]:
    return ads.sync_ads(
        inp.connect,
        inp.client(),
        inp.cabinet_id,
        run_id=inp.run_id,
        trigger=inp.trigger,
        queue=QUEUE,
        state_feed=None,  # a whole cycle, never the rest of a scheduled one
    )


autobidder_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="autobidder_sync",
        queue=QUEUE,
        feeds=(ads.CAMPAIGNS_FEED, ads.STATS_FEED),
        body=_on_demand,
        description="On demand (request kind autobidder-sync): the cabinet's campaigns, bids and the last "
        "three days of ad statistics, at user priority.",
        user_trigger="manual",
        cabinet_partitioned=(ads.CAMPAIGNS_FEED,),
    )
)


# -- the bid engine ------------------------------------------------------------------------------


class BidEngineConfig(Config):
    cabinet_id: str


@op(
    name=op_name("autobidder_bid_engine"),
    retry_policy=SCHEDULED_RETRY,
    description="Sets the bids the cabinet's autobidder rules call for (one PATCH of every change).",
)
def autobidder_bid_engine_op(context: OpExecutionContext, config: BidEngineConfig, warehouse: Warehouse, wb: WbApi):
    try:
        with locked_client(warehouse, wb, config.cabinet_id) as client:
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
