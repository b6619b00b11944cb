"""The on-demand autobidder sync (the original's `autobidder-sync` queue: POST /autobidder/sync → 202 + jobId).

A request of kind ``autobidder-sync`` (sensors/autobidder.py) runs ``autobidder_sync`` for its
cabinet at user priority, in a queue of its own so that it never waits behind the scheduled ads
backlog: the cabinet's campaigns with their current bids, then the ad statistics of the last three
days, waiting out WB's fullstats pace (one request per 20 s) rather than deferring. The request
row gets the run id as soon as the run starts. The bid engine itself is another module's.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from optima_pipelines.assets.wb_sync import SyncCall, SyncJobSpec, cabinet_sync_job
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncRun

QUEUE = "autobidder-sync"


def _on_demand(call: SyncCall) -> list[SyncRun]:
    return ads.sync_ads(
        call.warehouse.connect,
        call.client(),
        call.cabinet_id,
        run_id=call.run_id,
        trigger=call.trigger,
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
