"""Freshness per cabinet and feed: what a sync confirms, and which cabinets are stale and why."""

from datetime import UTC, datetime, timedelta

import pytest

from optima_pipelines.errors import InvalidInput
from optima_pipelines.operations.freshness import WATCHED_FEEDS, WatchedFeed, allowance_seconds, read_freshness
from optima_pipelines.sync.runs import FeedLoad, finish
from optima_pipelines.sync.state import mark_deferred
from optima_pipelines.wb import WbDeferred
from tests.ops_records import synced

ADS = next(f for f in WATCHED_FEEDS if f.feed == "ad_campaign_stats")
ALLOWANCE = allowance_seconds(ADS)  # 600 s: the ads' 5-min cadence, two windows


def add(conn, cabinet_id: str, status: str = "active", created_ago: float = 86400) -> None:
    conn.execute(
        "INSERT INTO cabinets (id, name, status, created_at) VALUES (%s, %s, %s, now() - make_interval(secs => %s))",
        (cabinet_id, cabinet_id.upper(), status, created_ago),
    )


def confirm(conn, cabinet_id: str, ago: float, feed: str = ADS.feed, status: str = "success", **kw) -> None:
    synced(conn, "rnp-ads-sync", feed, cabinet_id, datetime.now(UTC) - timedelta(seconds=ago), status=status, **kw)


def ads_freshness(conn, top: int = 10):
    return {f.feed: f for f in read_freshness(conn, top=top)}[ADS.feed]


def confirmed_at(conn, cabinet_id: str):
    row = conn.execute(
        "SELECT confirmed_at, last_success_at, last_error FROM ops_feed_sync_totals WHERE cabinet_id = %s AND feed = %s",
        (cabinet_id, ADS.feed),
    ).fetchone()
    return row


def test_a_sync_that_changed_nothing_confirms_the_feed_and_a_deferral_does_not(warehouse_conn):
    conn = warehouse_conn
    add(conn, "c1")
    run = FeedLoad("rnp-ads-sync", ADS.feed, "c1", "r1", "scheduled")  # nothing fetched, nothing changed
    finish(conn, [run], state_feed=ADS.state_feed)
    first, success, _ = confirmed_at(conn, "c1")
    assert first is not None and first == success

    paused = FeedLoad("rnp-ads-sync", ADS.feed, "c1", "r2", "scheduled")
    resume = datetime.now(UTC) + timedelta(minutes=20)
    finish(conn, [paused], state_feed=ADS.state_feed, deferred=WbDeferred("c1", "advert", resume, "penalty"))
    after, success, _ = confirmed_at(conn, "c1")
    assert after == first, "a sync WB deferred half-way confirmed the feed"
    assert success > first  # what /metrics called "last success" moved all the same

    confirm(conn, "c1", 0, status="failure", error="WbServerError: WB answered 502")
    kept, _, error = confirmed_at(conn, "c1")
    assert kept == first and error == "WbServerError: WB answered 502"


def test_a_failure_cannot_be_recorded_as_a_confirmation(warehouse_conn):
    add(warehouse_conn, "c1")
    with pytest.raises(InvalidInput, match="a failure sync cannot confirm"):
        confirm(warehouse_conn, "c1", 0, status="failure", confirmed=True)


def test_fresh_cabinets_pass_and_each_stale_one_is_named_with_its_cause(warehouse_conn):
    conn = warehouse_conn
    for c in ("fresh", "penalty", "revoked", "failing", "busy", "forgotten"):
        add(conn, c)
    add(conn, "newcomer", created_ago=ALLOWANCE + 60)  # its first sync never finished
    add(conn, "young", created_ago=30)  # created a moment ago: not stale yet
    add(conn, "paused-by-person", status="paused")  # not expected to sync: not watched
    confirm(conn, "fresh", 30)
    for c in ("penalty", "revoked", "failing", "busy", "forgotten", "paused-by-person"):
        confirm(conn, c, ALLOWANCE + 120)
    resume = datetime.now(UTC) + timedelta(minutes=20)
    mark_deferred(conn, "penalty", ADS.state_feed, resume, "WB answered 429: X-Ratelimit-Retry 1200 s")
    conn.execute(
        "UPDATE cabinets SET status = 'token_invalid', token_rejected_at = now(), "
        "token_rejected_reason = 'WB answered 401: token withdrawn' WHERE id = 'revoked'"
    )
    confirm(conn, "failing", 60, status="failure", error="WbServerError: WB answered 502 after 4 tries")
    conn.execute(
        "INSERT INTO sweep_outcomes (run_id, job, queue, cabinet_id, outcome, reason) "
        "VALUES ('s1', 'ads_sync_sweep', 'rnp-ads-sync', 'busy', 'skipped', "
        "'account-busy: another run holds the cabinet')"
    )

    ads = ads_freshness(conn)
    assert ads.watched == 8  # all but the paused one
    stale = {s.cabinet_id: s for s in ads.stale}
    assert set(stale) == {"penalty", "revoked", "failing", "busy", "forgotten", "newcomer"}
    assert ads.stale_count == 6
    assert {c: s.cause for c, s in stale.items()} == {
        "penalty": "wb_paused",
        "revoked": "token_invalid",
        "failing": "failing",
        "busy": "account_busy",
        "forgotten": "not_synced",
        "newcomer": "first_load",
    }
    assert resume.strftime("%Y-%m-%d %H:%M:%S UTC") in stale["penalty"].detail
    assert "X-Ratelimit-Retry 1200 s" in stale["penalty"].detail
    assert "token withdrawn" in stale["revoked"].detail
    assert "502 after 4 tries" in stale["failing"].detail
    assert "account-busy" in stale["busy"].detail
    assert ads.oldest_seconds == pytest.approx(ALLOWANCE + 120, abs=30)
    assert ads.allowance_seconds == ALLOWANCE


def test_a_rejected_token_makes_the_cabinet_stale_at_once(warehouse_conn):
    conn = warehouse_conn
    add(conn, "c1", status="token_invalid")
    confirm(conn, "c1", 5)
    ads = ads_freshness(conn)
    assert [(s.cabinet_id, s.cause) for s in ads.stale] == [("c1", "token_invalid")]


def test_the_stale_cabinets_named_are_bounded_and_the_stalest_first(warehouse_conn):
    conn = warehouse_conn
    for n in range(30):
        add(conn, f"c{n:02d}")
        confirm(conn, f"c{n:02d}", ALLOWANCE + 10 * (n + 1))
    ads = ads_freshness(conn, top=5)
    assert ads.stale_count == 30 and ads.watched == 30
    assert [s.cabinet_id for s in ads.stale] == ["c29", "c28", "c27", "c26", "c25"]


def test_no_cabinet_no_staleness(warehouse_conn):
    ads = ads_freshness(warehouse_conn)
    assert (ads.watched, ads.stale_count, ads.stale, ads.oldest_seconds) == (0, 0, [], 0.0)


def test_every_per_cabinet_wb_feed_is_watched_with_its_own_cadence():
    from optima_pipelines.orchestration.cadences import cadence
    from optima_pipelines.orchestration.queues import ASSET_QUEUES, KB_WB_NEWS_SYNC, QUEUES

    wb_feeds = {a for a, q in ASSET_QUEUES.items() if QUEUES[q].talks_to_wb and q != KB_WB_NEWS_SYNC}
    assert {f.feed for f in WATCHED_FEEDS} == wb_feeds
    for feed in WATCHED_FEEDS:
        assert cadence(feed.cadence).queue == feed.queue, feed
    assert isinstance(ADS, WatchedFeed)
