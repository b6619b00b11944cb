"""The feeds' freshness checks in Dagster: the sensor reports an evaluation per feed that names the
stale cabinets with their cause, again only when a feed turns stale or fresh or its window passed;
"Execute" in the UI (the multi-check in a run) says the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetKey,
    AssetSelection,
    SkipReason,
    build_sensor_context,
    materialize,
)

from optima_pipelines.assets.ads import ad_campaign_stats
from optima_pipelines.assets.freshness import CHECK_NAME, feed_freshness_checks
from optima_pipelines.definitions import RESOURCES
from optima_pipelines.operations.freshness import WATCHED_FEEDS
from optima_pipelines.sensors.freshness import feed_freshness_sensor
from optima_pipelines.sync.state import mark_deferred
from tests.ops_records import synced

ADS = "ad_campaign_stats"


def confirm(conn, cabinet: str, ago: float) -> None:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    for feed in (ADS, "ad_campaigns"):
        synced(conn, "rnp-ads-sync", feed, cabinet, at)


def tick(instance, cursor: str | None = None):
    with build_sensor_context(instance=instance, resources=RESOURCES, cursor=cursor) as context:
        return feed_freshness_sensor(context)


def test_the_sensor_names_the_stale_cabinet_then_reports_again_only_when_it_clears(dagster_instance, warehouse_conn):
    conn = warehouse_conn
    conn.execute("INSERT INTO cabinets (id, name) VALUES ('shop-1', 'S1'), ('shop-2', 'S2')")
    confirm(conn, "shop-1", 10)
    confirm(conn, "shop-2", 1800)  # the ads allow 10 min
    until = datetime.now(UTC) + timedelta(minutes=20)
    mark_deferred(conn, "shop-2", "ads", until, "WB answered 429 (X-Ratelimit-Retry 1200)")

    first = tick(dagster_instance)
    by_asset = {e.asset_key.to_user_string(): e for e in first.asset_events}
    assert set(by_asset) == {f.feed for f in WATCHED_FEEDS}  # every feed's first evaluation
    ads = by_asset[ADS]
    assert (ads.check_name, ads.passed, ads.severity) == (CHECK_NAME, False, AssetCheckSeverity.ERROR)
    assert ads.description.startswith("1 of 2 cabinets have no confirmed sync within 10 min: shop-2 stale for 30 min")
    assert "wb_paused: WB paused the sync until " + until.strftime("%Y-%m-%d %H:%M:%S UTC") in ads.description
    assert "X-Ratelimit-Retry 1200" in ads.description
    assert [s["cabinet"] for s in ads.metadata["stale"].value] == ["shop-2"]
    assert ads.metadata["stale_cabinets"].value == 1 and ads.metadata["watched_cabinets"].value == 2
    # Feeds never synced: both cabinets are young (created now): waiting for a first load is not stale yet.
    assert by_asset["wb_orders"].passed

    # Nothing changed: nothing reported (one evaluation per feed and window, not per tick).
    again = tick(dagster_instance, first.cursor)
    assert isinstance(again, SkipReason)

    confirm(conn, "shop-2", 0)
    cleared = tick(dagster_instance, first.cursor)
    # Both ads feeds turned fresh: reported at once; the others wait for their window.
    assert {(e.asset_key.to_user_string(), e.passed) for e in cleared.asset_events} == {
        (ADS, True),
        ("ad_campaigns", True),
    }
    assert cleared.asset_events[0].description.startswith("all 2 cabinets confirmed within 10 min")

    # Reported to Dagster, the evaluation is what the asset's check shows.
    for event in first.asset_events:
        dagster_instance.report_runless_asset_event(event)
    record = dagster_instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [AssetCheckKey(AssetKey(ADS), CHECK_NAME)]
    )[AssetCheckKey(AssetKey(ADS), CHECK_NAME)]
    evaluation = record.event.dagster_event.event_specific_data
    assert not evaluation.passed and "shop-2" in evaluation.description


def test_executing_the_check_in_a_run_evaluates_the_selected_feeds(dagster_instance, warehouse_conn):
    warehouse_conn.execute("INSERT INTO cabinets (id, name, status) VALUES ('shop-3', 'S3', 'token_invalid')")
    result = materialize(
        [ad_campaign_stats, feed_freshness_checks],
        selection=AssetSelection.checks(AssetCheckKey(AssetKey(ADS), CHECK_NAME)),
        resources=RESOURCES,
        instance=dagster_instance,
    )
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.asset_key == AssetKey(ADS) and not evaluation.passed
    assert "shop-3" in evaluation.description and "token_invalid" in evaluation.description
