"""landing_replay: the replay of landed WB answers (landing/replay.py) as a Dagster job, for the UI.

Partitioned like the feeds (cabinet × Moscow day): a run over a partition or a range replays, for
each cabinet of the range, the answers landed on its days (the feeds in ``ReplayConfig.feeds``, none
given: every feed), under the cabinet lock, without one request to WB. What the replayed merges
changed is recorded as the feeds' materializations (trigger ``manual``), so the re-aggregation sensor
recomputes the РНП of those days as it does after a live sync. `optima-pipelines replay` does the
same from a shell and recomputes in its own process.
"""

# No `from __future__ import annotations`: Dagster reads the op's config and context annotations.
from collections import defaultdict
from datetime import date

from dagster import Config, Failure, OpExecutionContext, in_process_executor, job, op
from pydantic import Field

from optima_pipelines.landing.replay import replay
from optima_pipelines.landing.store import ALL_FEEDS, LandingError, process_landing
from optima_pipelines.mart.plan import FEED_ROLLUP
from optima_pipelines.orchestration.materializations import emit_days, ensure_cabinet_partitions
from optima_pipelines.partitions import CABINET_DAY, parse_cabinet_day_key
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import feed_changes
from optima_pipelines.warehouse.cabinet_lock import held


class ReplayConfig(Config):
    #: Landing feeds to replay (orders, sales, finance, ads, funnel, stocks, catalog, prices, news); empty: all.
    feeds: list[str] = Field(default_factory=list)


@op(name="replay_landing")
def replay_landing(context: OpExecutionContext, config: ReplayConfig, warehouse: Warehouse) -> None:
    """Runs the syncs again over the WB answers landed for the run's cabinets and days."""
    unknown = sorted(set(config.feeds) - set(ALL_FEEDS))
    if unknown:
        raise Failure(
            description=f"unknown feeds {unknown}: the landing's are {', '.join(ALL_FEEDS)}", allow_retries=False
        )
    landing = process_landing()
    if landing is None:
        raise Failure(description="the landing is off (OPTIMA_LANDING_URL=off): nothing to replay", allow_retries=False)
    days: dict[str, list[date]] = defaultdict(list)
    for key in context.partition_keys:
        cabinet, day = parse_cabinet_day_key(key)
        days[cabinet].append(day)
    ensure_cabinet_partitions(context, sorted(days))
    wait = load_settings().cabinet_lock_wait_seconds
    for cabinet, its_days in sorted(days.items()):
        try:
            with held(warehouse.connect, cabinet, wait):
                report = replay(
                    landing,
                    warehouse.connect,
                    cabinet,
                    feeds=config.feeds or None,
                    first=min(its_days),
                    last=max(its_days),
                    run_id=context.run_id,
                )
        except LandingError as exc:
            raise Failure(description=str(exc), allow_retries=False) from None
        emit_days(context, feed_changes([r for r in report.runs if r.feed in FEED_ROLLUP], "manual"))
        context.log.info(f"replay of {cabinet} {min(its_days)}..{max(its_days)}: {report.summary()}")
        for failed in report.failed:
            context.log.warning(f"replay of {cabinet}: {failed}")


@job(
    name="landing_replay",
    partitions_def=CABINET_DAY,
    executor_def=in_process_executor,
    description="Rebuilds a cabinet's feed tables for its days from the WB answers landed then (docs/landing.md), "
    "sending nothing to WB; the re-aggregation recomputes the РНП of the days that changed.",
)
def landing_replay_job() -> None:
    replay_landing()
