"""Ads cadence: campaigns and statistics every 5 minutes per active cabinet."""

from __future__ import annotations

from optima_pipelines.assets.ads import ads_sync_job, ads_sync_sweep
from optima_pipelines.sensors.wb_sync import Sweep, interval_fanout_sensor
from optima_pipelines.sync import ads

ads_sync_sensor = interval_fanout_sensor(
    "ads_sync_sensor",
    Sweep(ads_sync_sweep, ads_sync_job, ads.QUEUE),
    ads.STATE_FEED,
    "Ad campaigns, bids and the statistics of the last three days",
)
