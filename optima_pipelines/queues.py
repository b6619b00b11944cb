"""The queues of the original system, as run tags: one place that says which work is which.

The run coordinator (``run_coordinator.py``) reads this module to tag every run it enqueues, and
jobs, schedules and sensors read it to tag the runs they request. Nothing here imports Dagster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

TAG_CABINET = "optima/cabinet"  # the cabinet gate: one WB-talking run per cabinet (dagster.yaml)
TAG_QUEUE = "optima/queue"  # the original queue name, e.g. digitization-sync
TAG_QUEUE_CLASS = "optima/queue-class"  # "sync" for the six sync queues (SYNC_QUEUE_CONCURRENCY)
TAG_SERIAL_QUEUE = "optima/serial-queue"  # queues that run one at a time
TAG_REQUEST_ID = "optima/request-id"  # the request row a run serves
TAG_TRIGGER = "optima/trigger"  # schedule | sensor | user | backfill | manual
TAG_PRIORITY = "dagster/priority"
#: Set on a run that ended without doing its work, with the reason (counted by /metrics).
TAG_SKIPPED = "optima/skipped"
SKIPPED_ACCOUNT_BUSY = "account-busy"

PRIORITY_USER = 100  # user imports and on-demand syncs overtake scheduled work
PRIORITY_SCHEDULED = 0
PRIORITY_REAGGREGATE = -10  # re-aggregation runs below ingest


#: The WB sync queues by name: code imports these, never retypes the strings.
DIGITIZATION_SYNC = "digitization-sync"
RNP_ADS_SYNC = "rnp-ads-sync"
RNP_FINANCE_SYNC = "rnp-finance-sync"
INVENTORY_SYNC = "inventory-sync"
CATALOG_SYNC = "catalog-sync"
RNP_SECTIONS_SYNC = "rnp-sections-sync"
KB_WB_NEWS_SYNC = "kb-wb-news-sync"


@dataclass(frozen=True)
class Queue:
    name: str
    #: One of the six sync queues that share SYNC_QUEUE_CONCURRENCY.
    sync: bool = False
    #: Talks to WB with a cabinet's token: gated per cabinet.
    talks_to_wb: bool = True
    #: Runs one at a time across all cabinets (the original's concurrency 1).
    serial: bool = False


QUEUES: dict[str, Queue] = {
    q.name: q
    for q in [
        Queue(DIGITIZATION_SYNC, sync=True),
        Queue(RNP_ADS_SYNC, sync=True),
        Queue(RNP_FINANCE_SYNC, sync=True),
        Queue(INVENTORY_SYNC, sync=True),
        Queue(CATALOG_SYNC, sync=True),
        Queue("autobidder-sync", sync=True),
        Queue(RNP_SECTIONS_SYNC),
        Queue(KB_WB_NEWS_SYNC, serial=True),
        Queue("re-aggregate", talks_to_wb=False),
        Queue("rnp-merge-sync", talks_to_wb=False, serial=True),
        Queue("partition-manager", talks_to_wb=False, serial=True),
        Queue("autobidder-bid-engine"),
        Queue("repricer-schedule"),
        Queue("booking-slot-monitor", serial=True),
        Queue("pricing-bulk"),
        Queue("autoreply-sync"),
        Queue("autoreply-answer-send"),
        Queue("ab-test-metrics", talks_to_wb=False, serial=True),
        Queue("maintenance", talks_to_wb=False, serial=True),
        Queue("example-jobs", talks_to_wb=False),
    ]
}

#: Which queue an asset's materialization belongs to, for runs launched without queue tags
#: (the UI's Materialize button, `dagster asset materialize`, backfills).
ASSET_QUEUES: dict[str, str] = {
    "cabinet_status_summary": "example-jobs",
    "wb_orders": DIGITIZATION_SYNC,
    "wb_sales": DIGITIZATION_SYNC,
    "rnp_sales": "re-aggregate",
    "rnp_ads": "re-aggregate",
    "rnp_finance": "re-aggregate",
    "rnp_daily": "re-aggregate",
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


def queue_tags(queue_name: str, *, cabinet_id: str | None = None, priority: int | None = None) -> dict[str, str]:
    """The tags a run of this queue carries (schedules and sensors call this when they request runs)."""
    q = QUEUES[queue_name]
    tags = {TAG_QUEUE: q.name}
    if q.sync:
        tags[TAG_QUEUE_CLASS] = "sync"
    if q.serial:
        tags[TAG_SERIAL_QUEUE] = q.name
    if cabinet_id is not None and q.talks_to_wb:
        tags[TAG_CABINET] = cabinet_id
    if priority is not None:
        tags[TAG_PRIORITY] = str(priority)
    return tags
