"""Freshness per cabinet and feed: is each cabinet's copy of each WB feed as recent as its cadence promises?

Every sync of a cabinet's feed that goes to the end of WB's data, whether or not anything changed,
records when it did (``ops_feed_sync_totals.confirmed_at``, written by ``operations.records.record_feed_sync``
in the sync's own transaction). Dagster's "last materialized" cannot say this: a sync that changes
nothing materializes nothing. A cabinet's feed is **stale** when its last confirmation is older than
the feed's **allowance** (one cadence period plus one window: a whole window missed, see
``allowance_seconds``), or at once when WB rejected the cabinet's token (``token_invalid``: nothing
will confirm it until a person gives a new token). Cabinets watched: active ones and those whose
token WB rejected; a cabinet a person paused or archived is not expected to sync.

For each stale cabinet, ``cause`` says what holds it, in this order: ``token_invalid`` (since when,
WB's reason), ``wb_paused`` (the sync's ``sync_state.resume_at``: WB's penalty until when),
``failing`` (the last sync's error), ``account_busy`` (its last sweep skipped it: another run held
the cabinet), ``first_load`` (its first sync has not finished), ``not_synced`` (nothing reached it:
a stopped sensor, a stuck queue, no run worker).

Readers: the feeds' freshness asset checks (``assets/freshness.py``, evaluated by
``sensors/freshness.py``) and /metrics (``operations/metrics.py``). One query (``sql/feed_freshness.sql``)
serves both, bounded whatever the number of cabinets: counts per feed and the ``top`` stalest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.orchestration.cadences import Cadence, cadence, cron_period_seconds
from optima_pipelines.orchestration.queues import ASSET_QUEUES, SKIPPED_ACCOUNT_BUSY
from optima_pipelines.sync import ads, catalog, digitization, finance, funnel, inventory

load = SqlFiles(__file__)

#: The stalest cabinets named per feed (the asset check's table, /metrics' labelled series): the
#: number of series stays bounded whatever the number of cabinets.
TOP = 10

#: The causes a stale cabinet is given, most telling first (/metrics' ``cause`` label).
CAUSES = ("token_invalid", "wb_paused", "failing", "account_busy", "first_load", "not_synced")


@dataclass(frozen=True)
class WatchedFeed:
    """A per-cabinet WB feed whose freshness is watched."""

    feed: str  # the asset and ops_feed_sync_totals.feed
    cadence: str  # the orchestration/cadences.py entry whose sweeps keep it fresh
    state_feed: str  # the sync_state row holding its WB pause

    @property
    def queue(self) -> str:
        return ASSET_QUEUES[self.feed]


#: Every per-cabinet feed synced from WB (the news are WB's, not a cabinet's: not watched).
WATCHED_FEEDS: tuple[WatchedFeed, ...] = (
    WatchedFeed(digitization.ORDERS.asset, "digitization_increment_sensor", digitization.ORDERS.name),
    WatchedFeed(digitization.SALES.asset, "digitization_increment_sensor", digitization.SALES.name),
    WatchedFeed(finance.FEED, "finance_sync_schedule", finance.STATE_FEED),
    WatchedFeed(ads.CAMPAIGNS_FEED, "ads_sync_sensor", ads.STATE_FEED),
    WatchedFeed(ads.STATS_FEED, "ads_sync_sensor", ads.STATE_FEED),
    WatchedFeed(funnel.FEED, "funnel_sync_sensor", funnel.STATE_FEED),
    WatchedFeed("products", "catalog_cards_schedule", catalog.CARDS_STATE_FEED),
    WatchedFeed("prices", "catalog_prices_sensor", catalog.PRICES_STATE_FEED),
    WatchedFeed("price_history", "catalog_prices_sensor", catalog.PRICES_STATE_FEED),
    WatchedFeed(inventory.FEED, "inventory_sync_schedule", inventory.STATE_FEED),
)


def period_seconds(entry: Cadence) -> int:
    """How often the cadence comes round: an interval's seconds, a cron's period (daily, hourly...)."""
    if entry.interval_seconds:
        return entry.interval_seconds
    return cron_period_seconds(entry.cadence, entry.timezone)


def allowance_seconds(feed: WatchedFeed) -> int:
    """How old a cabinet's last confirmation of ``feed`` may be: the cadence's period plus its window
    (an interval cadence: two intervals, the ads' 5 min give 10 min; the nightly finance report 24 h
    + its 6-h window). Within it a cabinet is confirmed once a window, wherever in the sweep it comes;
    beyond it the cabinet missed a whole window. Follows OPTIMA_CADENCE_SCALE and
    DIGITIZATION_INCREMENT_INTERVAL_MS like the cadence itself."""
    entry = cadence(feed.cadence)
    period = period_seconds(entry)
    return period + (entry.window_seconds or period)


def evaluate_every_seconds(feed: WatchedFeed) -> int:
    """How often the feed's asset check is evaluated at most: once a cadence window (an hour at most,
    so that a nightly feed's stale cabinet does not wait a day to be shown)."""
    return min(period_seconds(cadence(feed.cadence)), 3600)


@dataclass(frozen=True)
class StaleCabinet:
    cabinet_id: str
    #: Seconds since the last confirmed sync (since the cabinet's creation before its first one).
    age_seconds: float
    cause: str  # one of CAUSES
    detail: str  # a sentence for a person: since when, until when, WB's reason, the error

    def as_dict(self) -> dict[str, Any]:
        return {
            "cabinet": self.cabinet_id,
            "age_seconds": round(self.age_seconds),
            "cause": self.cause,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class FeedFreshness:
    feed: str
    allowance_seconds: int
    #: Cabinets watched (active, or token_invalid) and how many of them are stale.
    watched: int = 0
    stale_count: int = 0
    #: The oldest lag of a watched cabinet (0 without one).
    oldest_seconds: float = 0.0
    #: The ``TOP`` stalest, stalest first.
    stale: list[StaleCabinet] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return self.stale_count == 0


def _at(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "?"


def describe_age(seconds: float) -> str:
    """A lag for people: ``45 s``, ``12 min``, ``3.5 h`` (the check's text and the causes' details)."""
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def describe_cause(row: dict[str, Any], now: datetime) -> tuple[str, str]:
    """(cause, detail) of a stale cabinet's row of ``feed_freshness.sql`` (see the module docstring)."""
    if row["status"] == "token_invalid":
        reason = row["token_rejected_reason"] or "no reason given"
        return "token_invalid", f"WB rejected the cabinet's token at {_at(row['token_rejected_at'])}: {reason}"
    if row["resume_at"] is not None:
        due = "" if row["resume_at"] > now else " (the resume is due)"
        reason = row["pause_reason"] or "no reason given"
        return "wb_paused", f"WB paused the sync until {_at(row['resume_at'])}{due}: {reason}"
    if row["last_status"] == "failure":
        return "failing", f"the last sync failed at {_at(row['last_finished_at'])}: {row['last_error'] or '?'}"
    if row["outcome"] == "skipped" and SKIPPED_ACCOUNT_BUSY in (row["reason"] or ""):
        return "account_busy", f"its sweep at {_at(row['finished_at'])} skipped it: {row['reason']}"
    if row["outcome"] in ("failed", "retrying"):
        return "failing", f"its sweep at {_at(row['finished_at'])}: {row['outcome']}: {row['reason'] or '?'}"
    if row["confirmed_at"] is None:
        return "first_load", "its first sync of this feed has not finished yet"
    last = f"; its last sweep: {row['outcome']} ({row['reason']})" if row["outcome"] else ""
    return "not_synced", f"no sync has confirmed it since {_at(row['confirmed_at'])}{last}"


def read_freshness(
    conn: psycopg.Connection, feeds: tuple[WatchedFeed, ...] = WATCHED_FEEDS, *, top: int = TOP
) -> list[FeedFreshness]:
    """The freshness of ``feeds`` over every watched cabinet (one bounded query)."""
    allowances = {f.feed: allowance_seconds(f) for f in feeds}
    params = {
        "feeds": [f.feed for f in feeds],
        "state_feeds": [f.state_feed for f in feeds],
        "queues": [f.queue for f in feeds],
        "allowances": [float(allowances[f.feed]) for f in feeds],
        "top": top,
    }
    with conn.cursor() as cur:
        cur.execute(load("feed_freshness"), params)
        columns = [d.name for d in cur.description or ()]
        rows = [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]
        now_row = conn.execute("SELECT now()").fetchone()
    now = now_row[0] if now_row else datetime.now(UTC)
    out = {f.feed: FeedFreshness(f.feed, allowances[f.feed]) for f in feeds}
    stale: dict[str, list[StaleCabinet]] = {f.feed: [] for f in feeds}
    counts: dict[str, tuple[int, int, float]] = {}
    for row in rows:
        counts[row["feed"]] = (int(row["watched"]), int(row["stale_count"]), float(row["oldest_s"] or 0.0))
        if row["stale"]:
            cause, detail = describe_cause(row, now)
            stale[row["feed"]].append(StaleCabinet(row["cabinet_id"], float(row["age_s"]), cause, detail))
    for feed, (watched, stale_count, oldest) in counts.items():
        out[feed] = FeedFreshness(feed, allowances[feed], watched, stale_count, max(0.0, oldest), stale[feed])
    return [out[f.feed] for f in feeds]


def catching_up(conn: psycopg.Connection, cabinets: list[str], feeds: tuple[str, ...]) -> set[str]:
    """The cabinets among ``cabinets`` whose first load of one of ``feeds`` has not finished: what the
    mart holds of them is still filling, so a mismatch of its checks is the mart catching up, not a
    wrong figure (assets/rnp.py says stale, a warning)."""
    if not cabinets:
        return set()
    rows = conn.execute(load("catching_up"), {"cabinets": sorted(set(cabinets)), "feeds": list(feeds)}).fetchall()
    return {r[0] for r in rows}
