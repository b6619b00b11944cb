"""Ads: campaigns (by cabinet) and their statistics by cabinet × Moscow day (the `rnp-ads-sync` queue, every 5 min).

``ad_campaign_stats`` rows are per campaign, day, app and product; ``is_associated`` marks products
WB attributed to a campaign without it advertising them. A partition materialization means "this
day's statistics changed"; the РНП ads rollup recomputes it.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import ads

ad_campaigns = sync_partition_asset(
    ads.CAMPAIGNS_FEED,
    "ads",
    {
        ads.CAMPAIGNS_FEED: "The cabinet's ad campaigns (`GET /api/advert/v2/adverts`): status, bid type, payment "
        "type, and in `ad_campaign_products` the products each one advertises with their current bids "
        "(kopecks). Refreshed by every ads sync and every autobidder-sync request.",
    },
    ads.sync_campaigns,
    by_day=False,
)
ad_campaign_stats = sync_partition_asset(
    ads.STATS_FEED,
    "ads",
    {
        ads.STATS_FEED: "Ad statistics (`GET /adv/v3/fullstats`) per campaign, Moscow day, app (1 site, 32 "
        "Android, 64 iOS) and product: views, clicks, add-to-basket, orders, items, cancellations, spend "
        "and ordered value (rubles). Products WB shows but the campaign did not advertise are kept with "
        "`is_associated`. Materializing a partition reloads that day for every campaign WB serves "
        "statistics for.",
    },
    ads.sync_stats_day,
)


ADS_SYNC_SPEC = SyncJobSpec(
    name="ads_sync",
    queue=ads.QUEUE,
    feeds=(ads.CAMPAIGNS_FEED, ads.STATS_FEED),
    body=ads.sync,
    description="One cabinet's campaigns, then the ad statistics of today and the two days before "
    "(a cycle WB's 20-second fullstats pace interrupts resumes where it stopped).",
    state_feed=ads.STATE_FEED,
    cabinet_partitioned=(ads.CAMPAIGNS_FEED,),
)
ads_sync_job = cabinet_sync_job(ADS_SYNC_SPEC)
ads_sync_sweep = sweep_job(ADS_SYNC_SPEC)
