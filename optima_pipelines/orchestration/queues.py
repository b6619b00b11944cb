"""The queues of the original system, as run tags: one place that says which work is which.

The run coordinator (``orchestration/run_coordinator.py``) reads this module to tag every run it enqueues, and
jobs, schedules and sensors read it to tag the runs they request. Nothing here imports Dagster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

TAG_CABINET = "optima/cabinet"  # the cabinet gate: one WB-talking run per cabinet (dagster.yaml)
TAG_QUEUE = "optima/queue"  # the original queue name, e.g. digitization-sync
TAG_QUEUE_CLASS = "optima/queue-class"  # "sync": scheduled work of the six sync queues (SYNC_QUEUE_CONCURRENCY)
#: Who waits for the run: a person or a request ("user") or nobody ("scheduled": schedules and
#: sensors). dagster.yaml gives each lane its own share of max_concurrent_runs, so a user's run never
#: waits for scheduled sweeps to finish, only for its own cabinet.
TAG_LANE = "optima/lane"
LANE_USER = "user"
LANE_SCHEDULED = "scheduled"
TAG_SERIAL_QUEUE = "optima/serial-queue"  # queues that run one at a time
TAG_REQUEST_ID = "optima/request-id"  # the request row a run serves
TAG_TRIGGER = "optima/trigger"  # schedule | sensor | user | backfill | manual
#: On a retry a run worker did not execute because the run it retries still executed or succeeded
#: (orchestration/run_launcher.py): that run's id. The run is canceled; the run it names serves its request.
TAG_NOT_EXECUTED = "optima/not-executed"
TAG_PRIORITY = "dagster/priority"
#: Set on a run that ended without doing its work, with the reason (counted by /metrics).
TAG_SKIPPED = "optima/skipped"
SKIPPED_ACCOUNT_BUSY = "account-busy"
#: A sweep (one run over many cabinets, jobs/wb_sync.py): the cadence that launched it. Such a run
#: carries no cabinet tag (each cabinet's work takes the cabinet lock: warehouse/cabinet_lock.py).
TAG_SWEEP = "optima/sweep"
TAG_WINDOW = "optima/window"  # the cadence window a scheduled run belongs to
TAG_SHARD = "optima/shard"  # which of the window's sweep runs: "2/4"
TAG_SWEEP_CABINETS = "optima/sweep-cabinets"  # how many cabinets the run was given
#: What the sweep's cabinets came to, set when it ends: "succeeded=9 skipped=1 deferred=0 retrying=0 failed=0".
TAG_SWEEP_OUTCOME = "optima/sweep-outcome"
#: What a sweep's cabinet can come to (sweep_outcomes.outcome, the tag above, /metrics).
SWEEP_OUTCOMES = ("succeeded", "skipped", "deferred", "retrying", "failed")

PRIORITY_USER = 100  # user imports and on-demand syncs overtake scheduled work
PRIORITY_SCHEDULED = 0
PRIORITY_REAGGREGATE = -10  # re-aggregation runs below ingest


# The original queues, one constant each: code imports these, never retypes the string.
DIGITIZATION_SYNC = "digitization-sync"
RNP_ADS_SYNC = "rnp-ads-sync"
RNP_FINANCE_SYNC = "rnp-finance-sync"
INVENTORY_SYNC = "inventory-sync"
CATALOG_SYNC = "catalog-sync"
AUTOBIDDER_SYNC = "autobidder-sync"
RNP_SECTIONS_SYNC = "rnp-sections-sync"
KB_WB_NEWS_SYNC = "kb-wb-news-sync"
RE_AGGREGATE = "re-aggregate"
RNP_MERGE_SYNC = "rnp-merge-sync"
PARTITION_MANAGER = "partition-manager"
AUTOBIDDER_BID_ENGINE = "autobidder-bid-engine"
REPRICER_SCHEDULE = "repricer-schedule"
BOOKING_SLOT_MONITOR = "booking-slot-monitor"
PRICING_BULK = "pricing-bulk"
AUTOREPLY_SYNC = "autoreply-sync"
AUTOREPLY_ANSWER_SEND = "autoreply-answer-send"
AB_TEST_METRICS = "ab-test-metrics"
MAINTENANCE = "maintenance"
EXAMPLE_JOBS = "example-jobs"


@dataclass(frozen=True)
class Queue:
    name: str
    #: The domain name its code carries: the queue's work is in ``<folder>/<domain>.py`` (assets,
    #: jobs, sensors, sync, engines, operations), e.g. rnp-sections-sync -> funnel -> sync/funnel.py.
    domain: str
    #: One of the six sync queues that share SYNC_QUEUE_CONCURRENCY.
    sync: bool = False
    #: Talks to WB with a cabinet's token: gated per cabinet.
    talks_to_wb: bool = True
    #: Runs one at a time across all cabinets (the original's concurrency 1).
    serial: bool = False


QUEUES: dict[str, Queue] = {
    q.name: q
    for q in [
        Queue(DIGITIZATION_SYNC, "digitization", sync=True),
        Queue(RNP_ADS_SYNC, "ads", sync=True),
        Queue(RNP_FINANCE_SYNC, "finance", sync=True),
        Queue(INVENTORY_SYNC, "inventory", sync=True),
        Queue(CATALOG_SYNC, "catalog", sync=True),
        Queue(AUTOBIDDER_SYNC, "autobidder", sync=True),
        Queue(RNP_SECTIONS_SYNC, "funnel"),
        Queue(KB_WB_NEWS_SYNC, "news", serial=True),
        Queue(RE_AGGREGATE, "rnp", talks_to_wb=False),
        Queue(RNP_MERGE_SYNC, "rnp", talks_to_wb=False, serial=True),
        Queue(PARTITION_MANAGER, "partition_manager", talks_to_wb=False, serial=True),
        Queue(AUTOBIDDER_BID_ENGINE, "autobidder"),
        Queue(REPRICER_SCHEDULE, "repricer"),
        Queue(BOOKING_SLOT_MONITOR, "booking", serial=True),
        Queue(PRICING_BULK, "pricing_bulk"),
        Queue(AUTOREPLY_SYNC, "autoreply"),
        Queue(AUTOREPLY_ANSWER_SEND, "autoreply"),
        Queue(AB_TEST_METRICS, "abtests", talks_to_wb=False, serial=True),
        Queue(MAINTENANCE, "retention", talks_to_wb=False, serial=True),
        Queue(EXAMPLE_JOBS, "example", talks_to_wb=False),
    ]
}

#: Which queue an asset's materialization belongs to, for runs launched without queue tags
#: (the UI's Materialize button, `dagster asset materialize`, backfills).
ASSET_QUEUES: dict[str, str] = {
    "cabinet_status_summary": EXAMPLE_JOBS,
    "wb_orders": DIGITIZATION_SYNC,
    "wb_sales": DIGITIZATION_SYNC,
    "rnp_sales": RE_AGGREGATE,
    "rnp_ads": RE_AGGREGATE,
    "rnp_finance": RE_AGGREGATE,
    "rnp_daily": RE_AGGREGATE,
    "wb_report_lines": RNP_FINANCE_SYNC,
    "ad_campaigns": RNP_ADS_SYNC,
    "ad_campaign_stats": RNP_ADS_SYNC,
    "rnp_funnel_stats": RNP_SECTIONS_SYNC,
    "products": CATALOG_SYNC,
    "prices": CATALOG_SYNC,
    "price_history": CATALOG_SYNC,
    "stocks": INVENTORY_SYNC,
    "kb_articles": KB_WB_NEWS_SYNC,
}


def queue_for_assets(asset_keys: Iterable[str]) -> Queue | None:
    """The queue of a run over these assets: the first WB-talking queue among them, else any."""
    queues = [QUEUES[ASSET_QUEUES[k]] for k in asset_keys if k in ASSET_QUEUES]
    for q in queues:
        if q.talks_to_wb:
            return q
    return queues[0] if queues else None


def queue_tags(
    queue_name: str, *, cabinet_id: str | None = None, priority: int | None = None, lane: str | None = None
) -> dict[str, str]:
    """The tags a run of this queue carries (schedules and sensors call this when they request runs).

    The lane follows the priority when it is not given: user priority is the user lane, any other
    priority the scheduled lane. Without either (a job's own tags, which every launch of it carries,
    a person's included) the run coordinator decides the lane from the run's trigger. Only the
    scheduled lane's sync runs share the sync queues' limit."""
    q = QUEUES[queue_name]
    tags = {TAG_QUEUE: q.name}
    if lane is None and priority is not None:
        lane = LANE_USER if priority >= PRIORITY_USER else LANE_SCHEDULED
    if lane is not None:
        tags[TAG_LANE] = lane
    if q.sync and lane == LANE_SCHEDULED:
        tags[TAG_QUEUE_CLASS] = "sync"
    if q.serial:
        tags[TAG_SERIAL_QUEUE] = q.name
    if cabinet_id is not None and q.talks_to_wb:
        tags[TAG_CABINET] = cabinet_id
    if priority is not None:
        tags[TAG_PRIORITY] = str(priority)
    return tags


def sweep_tags(
    queue_name: str, *, cadence: str, window: str, shard: str, cabinets: int, priority: int = PRIORITY_SCHEDULED
) -> dict[str, str]:
    """The tags of a scheduled sweep run: its queue at a scheduled priority (cadences.sweep_priority),
    no cabinet (each cabinet takes its lock), the cadence and window it serves, which shard, how many
    cabinets."""
    return {
        **queue_tags(queue_name, priority=priority),
        TAG_TRIGGER: "schedule",
        TAG_WINDOW: window,
        TAG_SWEEP: cadence,
        TAG_SHARD: shard,
        TAG_SWEEP_CABINETS: str(cabinets),
    }
