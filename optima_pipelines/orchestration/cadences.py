"""Every schedule and sensor of the deployment, declared in one place (the original's ScheduleRegistry).

Each entry names the cadence, its timezone, the job it launches and what it fans out over; the
sensor and schedule definitions themselves live in `sensors/<domain>.py` and take their name,
cadence and job from here. `tests/unit/test_cadences.py` checks this list against DESIGN.md §2 and
against what definitions.py actually registers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from dagster import DefaultScheduleStatus, DefaultSensorStatus, sensor

from optima_pipelines.errors import ConfigError
from optima_pipelines.orchestration.dagster_internals import latest_cron_tick
from optima_pipelines.orchestration.queues import (
    AB_TEST_METRICS,
    AUTOBIDDER_BID_ENGINE,
    AUTOREPLY_SYNC,
    BOOKING_SLOT_MONITOR,
    CATALOG_SYNC,
    DIGITIZATION_SYNC,
    EXAMPLE_JOBS,
    INVENTORY_SYNC,
    KB_WB_NEWS_SYNC,
    MAINTENANCE,
    PARTITION_MANAGER,
    PRIORITY_SCHEDULED,
    RE_AGGREGATE,
    REPRICER_SCHEDULE,
    RNP_ADS_SYNC,
    RNP_FINANCE_SYNC,
    RNP_MERGE_SYNC,
    RNP_SECTIONS_SYNC,
)
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import MOSCOW_TZ_NAME


@dataclass(frozen=True)
class Cadence:
    name: str  # the Dagster schedule/sensor name
    queue: str  # the original queue (optima/queue tag)
    job: str | None  # the job it launches (None: it launches nothing, e.g. partition bookkeeping)
    kind: str  # "cron" | "interval" | "requests" | "events" | "table"
    cadence: str  # cron expression, or a human interval
    fans_out_over: str
    timezone: str = MOSCOW_TZ_NAME
    interval_seconds: int | None = None
    #: How long a scheduled run may wait in the queue before it is skipped as account-busy.
    window_seconds: int | None = None
    #: The sensor launches a run only for a cabinet with work to do (a bid to change, rules to
    #: apply), not one per cabinet and window: its cadence is the sensor's tick.
    on_demand: bool = False


#: The shortest interval OPTIMA_CADENCE_SCALE may give a cadence: its sensor ticks twice a window,
#: and the daemon's sensor loop does not keep time much finer than 10 s.
MIN_SCALED_INTERVAL_S = 20


def tick_seconds(interval_seconds: int, most: int = 30) -> int:
    """How often the sensor of an interval cadence ticks: at least twice a window (a tick is due
    ``minimum_interval_seconds`` after the last one, give or take the daemon's loop, so ticking once
    a window would leave some windows without a tick), and at most every ``most`` seconds."""
    return max(1, min(most, interval_seconds // 2))


def every(seconds: int) -> str:
    """An interval as the registry writes it: every 30 s, every 5 min, every 1 h."""
    if seconds % 3600 == 0:
        return f"every {seconds // 3600} h"
    if seconds % 60 == 0:
        return f"every {seconds // 60} min"
    return f"every {seconds} s"


def _scaled(name: str, seconds: int, scale: float) -> int:
    """``seconds`` of a per-cabinet interval cadence under OPTIMA_CADENCE_SCALE."""
    if scale == 1:
        return seconds
    scaled = round(seconds / scale)
    if scaled < MIN_SCALED_INTERVAL_S:
        raise ConfigError(
            f"OPTIMA_CADENCE_SCALE={scale:g} would run {name} every {seconds / scale:.1f} s; "
            f"its interval of {seconds} s allows a scale of at most {seconds / MIN_SCALED_INTERVAL_S:g} "
            f"(no interval cadence may run more often than every {MIN_SCALED_INTERVAL_S} s)"
        )
    return scaled


def cadences() -> list[Cadence]:
    settings = load_settings()
    scale = settings.cadence_scale
    increment = _scaled("digitization_increment_sensor", max(1, settings.increment_interval_ms // 1000), scale)
    return [
        Cadence(
            "cabinet_partitions_sensor",
            "-",
            None,
            "table",
            "every 30 s",
            "the cabinets table (adds cabinets to the partition dimension)",
            interval_seconds=30,
        ),
        Cadence(
            "requests_sensor",
            "-",
            None,
            "requests",
            "every 2 s",
            "pending rows of the requests table (user imports and on-demand work)",
            interval_seconds=2,
        ),
        Cadence(
            "account_busy_sensor",
            "-",
            None,
            "runs",
            "every 30 s",
            "queued scheduled runs (cancels those queued past their cadence window)",
            interval_seconds=30,
        ),
        Cadence(
            "dead_run_sensor",
            "-",
            None,
            "runs",
            "every 15 s",
            "started runs (fails those whose worker process is gone)",
            interval_seconds=15,
        ),
        Cadence(
            "digitization_increment_sensor",
            DIGITIZATION_SYNC,
            "digitization_increment_sweep",
            "interval",
            f"{every(increment)} (DIGITIZATION_INCREMENT_INTERVAL_MS)",
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            interval_seconds=increment,
            window_seconds=increment,
        ),
        Cadence(
            "digitization_backfill_schedule",
            DIGITIZATION_SYNC,
            "digitization_backfill_sweep",
            "cron",
            "0 3 * * *",
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            window_seconds=3 * 3600,
        ),
        Cadence(
            "rnp_reaggregate_sensor",
            RE_AGGREGATE,
            "rnp_recompute",
            "events",
            # A user's import recomputes its own days in its run; scheduled syncs' changes are planned
            # at most every OPTIMA_REAGGREGATE_EVERY_SECONDS: a tick every 3 s cost the daemon and
            # the code server ~1,000 ticks an hour for nothing (bench/scale.py, N = 200).
            "every 15 s",
            "new materializations of the feed assets in the event log (cursor)",
            interval_seconds=15,
        ),
        Cadence(
            "rnp_merge_sync",
            RNP_MERGE_SYNC,
            "rnp_recompute",
            "cron",
            "0 6 * * *",
            "active cabinets: the last 3 days, plus days of the last 90 with orders but no rnp_daily rows",
        ),
        Cadence(
            "partition_manager_weekly",
            PARTITION_MANAGER,
            "partition_manager",
            "cron",
            "0 3 * * 1",
            "the partitioned tables (rnp_daily and its rollups)",
            timezone="UTC",
        ),
        Cadence(
            "prune_runs_nightly",
            MAINTENANCE,
            "prune_runs",
            "cron",
            "40 2 * * *",
            "successful runs older than OPTIMA_RUN_RETENTION_DAYS",
        ),
        *_sync_cadences(scale),
        *_engine_cadences(scale),
        _freshness_cadence(increment, scale),
    ]


def _freshness_cadence(increment: int, scale: float) -> Cadence:
    """The feeds' freshness checks (sensors/freshness.py): they tick at least twice the shortest feed
    window (ads, the increment, prices), at most every minute, and evaluate each feed's check at most
    once its own window (and when the feed turns stale or fresh)."""
    shortest = min(increment, _scaled("ads_sync_sensor", 300, scale), _scaled("catalog_prices_sensor", 1800, scale))
    tick = tick_seconds(shortest, most=60)
    return Cadence(
        "feed_freshness_sensor",
        "-",
        None,
        "interval",
        every(tick),
        "the feeds' confirmations per cabinet (ops_feed_sync_totals): evaluates each feed's fresh_per_cabinet "
        "check (no run), at most once a window of the feed",
        interval_seconds=tick,
    )


def _sync_cadences(scale: float) -> list[Cadence]:
    """The other WB syncs (issue 5): finance, ads, funnel, catalog, stocks, news, and their resumes."""
    ads = _scaled("ads_sync_sensor", 300, scale)
    funnel = _scaled("funnel_sync_sensor", 3600, scale)
    prices = _scaled("catalog_prices_sensor", 1800, scale)
    return [
        Cadence(
            "finance_sync_schedule",
            RNP_FINANCE_SYNC,
            "finance_sync_sweep",
            "cron",
            "0 5 * * *",
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            window_seconds=6 * 3600,
        ),
        Cadence(
            "ads_sync_sensor",
            RNP_ADS_SYNC,
            "ads_sync_sweep",
            "interval",
            every(ads),
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            interval_seconds=ads,
            window_seconds=ads,
        ),
        Cadence(
            "funnel_sync_sensor",
            RNP_SECTIONS_SYNC,
            "funnel_sync_sweep",
            "interval",
            every(funnel),
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            interval_seconds=funnel,
            window_seconds=funnel,
        ),
        Cadence(
            "catalog_cards_schedule",
            CATALOG_SYNC,
            "catalog_cards_sync_sweep",
            "cron",
            "0 4 * * *",
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            window_seconds=3 * 3600,
        ),
        Cadence(
            "catalog_prices_sensor",
            CATALOG_SYNC,
            "catalog_prices_sync_sweep",
            "interval",
            every(prices),
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            interval_seconds=prices,
            window_seconds=prices,
        ),
        Cadence(
            "inventory_sync_schedule",
            INVENTORY_SYNC,
            "inventory_sync_sweep",
            "cron",
            "0 * * * *",
            "active cabinets (a sweep: one run per shard of OPTIMA_SWEEP_SHARD_SIZE)",
            window_seconds=3600,
        ),
        Cadence(
            "news_sync_schedule",
            KB_WB_NEWS_SYNC,
            "news_sync",
            "cron",
            "15 */3 * * *",
            "one run: the token of any active cabinet, the next one if WB rejects it",
            window_seconds=3 * 3600,
        ),
        Cadence(
            "cron_sweep_catchup_sensor",
            "-",
            None,
            "interval",
            "every 60 s",
            "cabinets a cron cadence's tick left out (busy, importing, paused) or its sweep skipped as account-busy, "
            "once due, until the cadence's window ends (launches that cadence's sweep)",
            interval_seconds=60,
        ),
        Cadence(
            "wb_sync_resume_sensor",
            "-",
            None,
            "interval",
            "every 30 s",
            "cabinets whose digitization, finance, ads, funnel, stocks or catalog sync WB paused, once the pause is over "
            "(launches that sync's job)",
            interval_seconds=30,
        ),
    ]


def _engine_cadences(scale: float) -> list[Cadence]:
    """The engines of issue 8 that run on a cadence (the on-demand ones are request kinds)."""
    autoreply = _scaled("autoreply_sync_sensor", 900, scale)
    return [
        Cadence(
            "autobidder_bid_engine_sensor",
            AUTOBIDDER_BID_ENGINE,
            "autobidder_bid_engine_sweep",
            "interval",
            "every 60 s",
            "cabinets whose autobidder rules would change a bid now (decided in the sensor; no run otherwise)",
            interval_seconds=60,
            window_seconds=60,
            on_demand=True,
        ),
        Cadence(
            "booking_slot_monitor",
            BOOKING_SLOT_MONITOR,
            None,
            "interval",
            "every 12 s",
            "open booking tasks: one poll of WB's acceptance coefficients for all of them, in the sensor (no run)",
            interval_seconds=12,
        ),
        Cadence(
            "ab_test_metrics_schedule",
            AB_TEST_METRICS,
            "ab_test_metrics",
            "cron",
            "25 */3 * * *",
            "one run for every running A/B test (skipped when none runs)",
            window_seconds=3 * 3600,
        ),
        Cadence(
            "repricer_sensor",
            REPRICER_SCHEDULE,
            "repricer_sweep",
            "table",
            "every N hours per (cabinet, rule interval), from repricer_rules (checked every minute)",
            "(cabinet, interval_hours) of the enabled rules of active cabinets, once per slot of the interval",
            interval_seconds=60,
        ),
        Cadence(
            "autoreply_sync_sensor",
            AUTOREPLY_SYNC,
            "autoreply_sync_sweep",
            "interval",
            every(autoreply),
            "active cabinets with enabled autoreply_rules",
            interval_seconds=autoreply,
            window_seconds=autoreply,
            on_demand=True,
        ),
        Cadence(
            "cabinet_status_summary_schedule",
            EXAMPLE_JOBS,
            "cabinet_status_summary_job",
            "cron",
            "0 7 * * *",
            "one run (the template; stopped by default)",
        ),
    ]


def cron_period_seconds(cron: str, timezone: str, at: datetime | None = None) -> int:
    """How far apart a cron's ticks are (daily 86,400, hourly 3,600): the gap before its latest tick."""
    latest = latest_cron_tick(cron, at or datetime.now(UTC), timezone)
    before = latest_cron_tick(cron, latest - timedelta(seconds=1), timezone)
    return int((latest - before).total_seconds())


def cadence(name: str) -> Cadence:
    for c in cadences():
        if c.name == name:
            return c
    raise KeyError(name)


def sweep_priority(name: str) -> int:
    """The queue priority of an interval cadence's sweeps: the shorter its window, the sooner its
    sweeps leave the queue when windows begin together (at :00 and :30 the increment's, the prices'
    and the ads' shards are created at once, and the ads' 5-minute window is the one lost waiting),
    always between re-aggregation (-10) and a person's runs (100): ads 8, the increment and prices 5,
    the funnel 4, crons the scheduled 0."""
    seconds = cadence(name).interval_seconds
    if not seconds:
        return PRIORITY_SCHEDULED
    return PRIORITY_SCHEDULED + max(0, min(9, int(math.log2(86400 / seconds))))


def stopped_automations() -> set[str]:
    """The sensors and schedules OPTIMA_AUTOMATIONS_STOPPED starts stopped; ConfigError on a pattern
    that names none of them (a typo would otherwise leave an engine running)."""
    names = [c.name for c in cadences()]
    stopped: set[str] = set()
    for pattern in load_settings().automations_stopped:
        matched = {n for n in names if fnmatchcase(n, pattern)}
        if not matched:
            raise ConfigError(
                f"OPTIMA_AUTOMATIONS_STOPPED: {pattern!r} names no sensor or schedule; they are: {', '.join(names)}"
            )
        stopped |= matched
    return stopped


def _runs_by_default(name: str, running: bool) -> bool:
    cadence(name)  # every sensor and schedule is declared above
    return running and name not in stopped_automations()


def sensor_status(name: str) -> DefaultSensorStatus:
    """How the sensor starts in a new deployment: running, unless OPTIMA_AUTOMATIONS_STOPPED names it."""
    return DefaultSensorStatus.RUNNING if _runs_by_default(name, True) else DefaultSensorStatus.STOPPED


def cadence_sensor(entry: Cadence, *, default_interval_seconds: int, **kwargs: Any) -> Any:
    """``@sensor`` for the cadence ``entry``: its name, its interval (``default_interval_seconds`` when
    the cadence declares none) and how it starts (:func:`sensor_status`); ``kwargs`` go to ``sensor``."""
    return sensor(
        name=entry.name,
        minimum_interval_seconds=entry.interval_seconds or default_interval_seconds,
        default_status=sensor_status(entry.name),
        **kwargs,
    )


def schedule_status(name: str, running: bool = True) -> DefaultScheduleStatus:
    """How the schedule starts in a new deployment: ``running``, unless OPTIMA_AUTOMATIONS_STOPPED names it."""
    return DefaultScheduleStatus.RUNNING if _runs_by_default(name, running) else DefaultScheduleStatus.STOPPED
