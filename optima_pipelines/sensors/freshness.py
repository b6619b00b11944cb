"""Evaluates the feeds' freshness checks (assets/freshness.py) without a run.

Every tick reads the feeds' freshness (one bounded query, ``operations.freshness.read_freshness``) and
reports a feed's ``fresh_per_cabinet`` evaluation to Dagster when the feed turned stale or fresh,
or once its cadence window has passed since the last one (an hour at most): at most one evaluation
per feed and window in Dagster's storage, not one per cabinet. The cursor keeps, per feed, when it
was last reported and whether it was fresh.
"""

from __future__ import annotations

import json
import time

import psycopg
from dagster import SensorEvaluationContext, SensorResult, SkipReason

from optima_pipelines.assets.freshness import evaluation
from optima_pipelines.errors import OptimaError
from optima_pipelines.operations.freshness import WATCHED_FEEDS, FeedFreshness, evaluate_every_seconds, read_freshness
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor
from optima_pipelines.resources.warehouse import Warehouse

_CADENCE = cadence("feed_freshness_sensor")


def due_feeds(
    feeds: list[FeedFreshness], cursor: dict[str, list[float | bool]], now: float
) -> tuple[list[FeedFreshness], dict[str, list[float | bool]]]:
    """The feeds whose evaluation to report now, and the new cursor (feed -> [reported at, fresh]):
    a feed never reported, one whose fresh/stale state changed, and one whose window has passed."""
    every = {f.feed: evaluate_every_seconds(f) for f in WATCHED_FEEDS}
    due, new = [], dict(cursor)
    for feed in feeds:
        last = cursor.get(feed.feed)
        if last is None or bool(last[1]) != feed.fresh or now - float(last[0]) >= every[feed.feed]:
            due.append(feed)
            new[feed.feed] = [now, feed.fresh]
    return due, new


@cadence_sensor(
    _CADENCE,
    default_interval_seconds=60,
    description="Evaluates each WB feed's fresh_per_cabinet check (no run): fails naming the cabinets whose last "
    "confirmed sync is older than the feed's allowance, with what holds each (WB's pause, token_invalid, "
    "account-busy, the last error). At most once a window per feed, and when a feed turns stale or fresh.",
)
def feed_freshness_sensor(context: SensorEvaluationContext, warehouse: Warehouse) -> SensorResult | SkipReason:
    try:
        with warehouse.connect() as conn:
            feeds = read_freshness(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the feeds' freshness: {exc.__class__.__name__}: {exc}")
    cursor = json.loads(context.cursor) if context.cursor else {}
    due, cursor = due_feeds(feeds, cursor, time.time())
    if not due:
        stale = sum(f.stale_count for f in feeds)
        return SkipReason(f"no feed's freshness changed ({stale} stale cabinet-feeds); next evaluations when due")
    for feed in due:
        if not feed.fresh:
            context.log.info(f"{feed.feed}: {feed.stale_count} of {feed.watched} cabinets stale")
    return SensorResult(asset_events=[evaluation(f) for f in due], cursor=json.dumps(cursor))
