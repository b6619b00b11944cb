"""The feeds' freshness checks: ``fresh_per_cabinet`` on every per-cabinet WB feed asset.

The check fails while a watched cabinet's last confirmed sync of the feed is older than the feed's
allowance (or WB rejected its token), naming the stale cabinets and, for each, what holds it
(``operations/freshness.py``: WB's pause until when, ``token_invalid``, account-busy, the last error...).
Dagster's own freshness (1.13's ``FreshnessPolicy``, ``build_last_update_freshness_checks``) judges
an asset by its last materialization: a sync that changes nothing records none, and one cabinet of
a thousand falling behind moves nothing there. So the check reads the warehouse's confirmations.

Cost: one evaluation per feed is one row of Dagster's storage. ``sensors/freshness.py`` evaluates
the checks without a run, at most once a cadence window per feed (and when a feed turns stale or
fresh); "Execute" in the UI runs ``feed_freshness_checks`` (this multi-check) for the selected feeds.
"""

# No "from __future__ import annotations": Dagster reads the check's context and resource types from live annotations.

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
    multi_asset_check,
)

from optima_pipelines.operations.freshness import (
    WATCHED_FEEDS,
    FeedFreshness,
    StaleCabinet,
    describe_age,
    read_freshness,
)
from optima_pipelines.resources.warehouse import Warehouse

#: The check's name on every feed asset.
CHECK_NAME = "fresh_per_cabinet"
#: Stale cabinets the description names (the metadata's table holds the feed's ten stalest).
DESCRIBED = 5


def _table(stale: list[StaleCabinet]) -> str:
    lines = ["| cabinet | stale for | cause | detail |", "|---|---|---|---|"]
    for s in stale:
        detail = s.detail.replace("|", "/").replace("\n", " ")
        lines.append(f"| {s.cabinet_id} | {describe_age(s.age_seconds)} | {s.cause} | {detail} |")
    return "\n".join(lines)


def evaluation(feed: FeedFreshness) -> AssetCheckEvaluation:
    """The check's evaluation for ``feed``: passed when no watched cabinet is stale; else an error
    naming the stale cabinets and their causes (a warning when every one is only waiting for its
    first load: a new cabinet catching up is not a fault)."""
    allowance = describe_age(feed.allowance_seconds)
    metadata: dict[str, Any] = {
        "stale_cabinets": MetadataValue.int(feed.stale_count),
        "watched_cabinets": MetadataValue.int(feed.watched),
        "allowance_seconds": MetadataValue.int(feed.allowance_seconds),
        "oldest_lag_seconds": MetadataValue.float(round(feed.oldest_seconds, 1)),
        "stale": MetadataValue.json([s.as_dict() for s in feed.stale]),
    }
    if feed.fresh:
        description = (
            f"all {feed.watched} cabinets confirmed within {allowance} (oldest {describe_age(feed.oldest_seconds)} ago)"
        )
        severity = AssetCheckSeverity.ERROR
    else:
        named = "; ".join(
            f"{s.cabinet_id} stale for {describe_age(s.age_seconds)}: {s.cause}: {s.detail}"
            for s in feed.stale[:DESCRIBED]
        )
        more = feed.stale_count - min(len(feed.stale), DESCRIBED)
        description = (
            f"{feed.stale_count} of {feed.watched} cabinets have no confirmed sync within {allowance}: {named}"
            + (f"; and {more} more" if more > 0 else "")
        )
        metadata["stale_table"] = MetadataValue.md(_table(feed.stale))
        first_load_only = all(s.cause == "first_load" for s in feed.stale) and len(feed.stale) == feed.stale_count
        severity = AssetCheckSeverity.WARN if first_load_only else AssetCheckSeverity.ERROR
    return AssetCheckEvaluation(
        asset_key=AssetKey(feed.feed),
        check_name=CHECK_NAME,
        passed=feed.fresh,
        severity=severity,
        description=description,
        metadata=metadata,
    )


@multi_asset_check(
    name="feed_freshness_checks",
    specs=[
        AssetCheckSpec(
            CHECK_NAME,
            asset=f.feed,
            description=f"Every active cabinet's last confirmed sync of {f.feed} (changed or not) is within the "
            f"allowance of its cadence ({f.cadence}: its period plus its window), and no cabinet's token is "
            "rejected. Names each stale cabinet and what holds it (WB's pause, token_invalid, account-busy, "
            "the last error). Evaluated by feed_freshness_sensor.",
        )
        for f in WATCHED_FEEDS
    ],
    can_subset=True,
)
def feed_freshness_checks(context: AssetCheckExecutionContext, warehouse: Warehouse) -> Iterator[AssetCheckEvaluation]:
    """The freshness of the selected feeds, as the sensor evaluates it."""
    selected = {key.asset_key for key in context.selected_asset_check_keys}
    with warehouse.connect() as conn:
        feeds = read_freshness(conn, tuple(f for f in WATCHED_FEEDS if AssetKey(f.feed) in selected))
    for feed in feeds:
        yield evaluation(feed)
