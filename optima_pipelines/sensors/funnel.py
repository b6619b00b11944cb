"""Funnel cadence: the sales funnel of the last three days, hourly per active cabinet."""

from __future__ import annotations

from optima_pipelines.assets.funnel import funnel_sync_job, funnel_sync_sweep
from optima_pipelines.sensors.wb_sync import Sweep, interval_fanout_sensor
from optima_pipelines.sync import funnel

funnel_sync_sensor = interval_fanout_sensor(
    "funnel_sync_sensor",
    Sweep(funnel_sync_sweep, funnel_sync_job, funnel.QUEUE),
    funnel.STATE_FEED,
    "The sales funnel per product of today and the two days before",
)
