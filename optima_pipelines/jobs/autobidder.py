"""The autobidder: the on-demand sync (`autobidder-sync` queue) and the bid engine (`autobidder-bid-engine`).

**The on-demand sync** (the original's POST /autobidder/sync → 202 + jobId):

A request of kind ``autobidder-sync`` (sensors/autobidder.py) runs ``autobidder_sync`` for its
cabinet at user priority, in a queue of its own so that it never waits behind the scheduled ads
backlog (its entry point is ``sync.ads.sync_on_demand``): the cabinet's campaigns with their
current bids, then the ad statistics of the last three days, waiting out WB's fullstats pace (one
request per 20 s) rather than deferring. The request row gets the run id as soon as the run starts.

**The bid engine** (``autobidder_bid_engine``): one cabinet's bids (engines/autobidder.py
``apply_bids``). Its 60-s sensor (sensors/autobidder.py) sweeps the cabinets with a bid to change
(``autobidder_bid_engine_sweep``: each under its cabinet lock); every bid sent is first recorded
in ``engine_actions`` with an intent id, so a retry never sends a confirmed bid twice. A WB pause
beyond the client's wait, or a transient failure, ends that cabinet without a change: the next
tick decides again.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.

from optima_pipelines.engines import autobidder
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import AUTOBIDDER_BID_ENGINE, AUTOBIDDER_SYNC
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import FeedLoad, SyncInput

log = get_logger(__name__)

QUEUE = AUTOBIDDER_SYNC
BID_QUEUE = AUTOBIDDER_BID_ENGINE


autobidder_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="autobidder_sync",
        queue=QUEUE,
        feeds=(ads.CAMPAIGNS_FEED, ads.STATS_FEED),
        body=ads.sync_on_demand,
        description="On demand (request kind autobidder-sync): the cabinet's campaigns, bids and the last "
        "three days of ad statistics, at user priority.",
        user_trigger="manual",
        cabinet_partitioned=(ads.CAMPAIGNS_FEED,),
    )
)


# -- the bid engine ------------------------------------------------------------------------------


def bid_engine(inp: SyncInput) -> list[FeedLoad]:
    """One cabinet's bids as the sync pipeline runs them (a ``sync.runs.Sync`` that writes no feed:
    what it did goes to ``inp.notes``, the run's log)."""
    result = autobidder.apply_bids(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id)
    inp.notes["bids"] = result.summary()
    if result.refused:
        log.warning(f"WB refused bids of {inp.cabinet_id} (recorded on the rules): {result.refused}")
    return []


BID_SPEC = SyncJobSpec(
    name="autobidder_bid_engine",
    queue=BID_QUEUE,
    feeds=(),
    body=bid_engine,
    description="The autobidder's bid engine: new bids from a cabinet's rules and the latest ad statistics "
    "(one PATCH of every change).",
)
#: One cabinet (the Launchpad, a retry); the sensor sweeps the cabinets with a bid to change.
autobidder_bid_engine_job = cabinet_sync_job(BID_SPEC)
autobidder_bid_engine_sweep = sweep_job(BID_SPEC)
