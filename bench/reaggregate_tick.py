"""The re-aggregation sensor's tick in the real daemon after a cadence window of many cabinets.

    python bench/reaggregate_tick.py [--cabinets 1000] [--rounds 2]

A deployment with ``--cabinets`` cabinets (the dynamic partitions of two years of days) and only
``rnp_reaggregate_sensor`` running. Each round writes one window's increment (each cabinet's today
and yesterday of wb_orders, wb_sales and ad_campaign_stats: the РНП pairs the feeds' triggers make
due, and the feeds' materializations; ``harness.report_increment``), then reads the
sensor's ticks from Dagster's tick storage: the tick that planned runs, how long it took and how
many runs it created, and when those runs were created, started and ended. The tick creates its runs
itself, so what a run's creation costs the daemon is what holds the sensor's next tick (issue 17:
ticks up to 385 s apart at N = 1,000 before a run's planned partitions were stored in batches).

Baseline, same run: the same sensor's ticks that planned nothing (their fixed cost).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "the re-aggregation sensor's tick, which creates its runs, after a window of N cabinets"
OPTIONS = [
    Option("cabinets", 1000, 50, "cabinets whose window's due pairs the sensor plans"),
    Option("rounds", 2, 1, "windows reported one after the other"),
]
FEEDS = ("wb_orders", "wb_sales", "ad_campaign_stats")
SENSOR = "rnp_reaggregate_sensor"


def sensor_ticks(instance: Any) -> list[Any]:
    from dagster._core.scheduler.instigation import InstigatorType

    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.instigator_name == SENSOR:
            return list(instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=200))
    return []


def run(bench: Bench, opts: Any) -> None:
    from dagster import DagsterRunStatus, RunsFilter

    from optima_pipelines.timeutil import today_moscow
    from tests.system.harness import only_automations

    start = (today_moscow() - timedelta(days=730)).isoformat()
    ended = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
    with bench.environment("reaggtick", OPTIMA_PARTITIONS_START=start, **only_automations(SENSOR)) as env:
        with env.instance() as instance:
            cabinets = harness.add_offline_cabinets(env, instance, opts.cabinets)
        with harness.deployment(env) as stack:
            planning: list[tuple[float, int]] = []  # (tick seconds, runs created)
            queued_to_start: list[float] = []
            seen: set[str] = set()
            for n in range(opts.rounds):
                began = time.time()
                harness.report_increment(env, stack.instance, cabinets, FEEDS)
                harness.say(f"  round {n + 1}: {len(cabinets) * 2:,} (cabinet, day)s of {len(FEEDS)} feeds written")

                def planned(began: float = began) -> Any:
                    done = [t for t in sensor_ticks(stack.instance) if t.timestamp >= began and t.run_ids]
                    return done if done and done[-1].end_timestamp else None

                harness.wait_for(planned, "a tick that planned runs", timeout=900, poll=2)

                def runs_ended() -> Any:
                    records = stack.instance.get_run_records(RunsFilter(job_name="rnp_recompute"))
                    fresh = [r for r in records if r.dagster_run.run_id not in seen]
                    return fresh if fresh and all(r.dagster_run.status in ended for r in fresh) else None

                fresh = harness.wait_for(runs_ended, "the tick's runs to end", timeout=1800, poll=3)
                for tick in sensor_ticks(stack.instance):
                    if tick.timestamp >= began and tick.run_ids:
                        planning.append((tick.end_timestamp - tick.timestamp, len(tick.run_ids)))
                for record in fresh:
                    seen.add(record.dagster_run.run_id)
                    if record.start_time:
                        queued_to_start.append(record.start_time - record.create_timestamp.timestamp())
            skips = [
                t.end_timestamp - t.timestamp
                for t in sensor_ticks(stack.instance)
                if not t.run_ids and t.end_timestamp and t.skip_reason
            ]
    size = f"{opts.cabinets} cabinets × 2 days × {len(FEEDS)} feeds"
    runs = sum(n for _, n in planning)
    per_run = sum(s for s, _ in planning) / max(1, runs)
    baseline = statistics.median(skips) if skips else None
    note = f"{len(planning)} planning ticks, {runs} runs created"
    bench.figure(f"planning tick, {size}", max(s for s, _ in planning), "s", baseline_name="a tick that plans nothing",
                 baseline=baseline, higher_is_better=False, note=note)  # fmt: skip
    bench.figure(f"planning tick per run it creates, {size}", per_run, "s", baseline_name="a tick that plans nothing",
                 baseline=baseline, higher_is_better=False, note=note)  # fmt: skip
    bench.figure(f"a re-aggregation run, created → started, {size}", statistics.median(queued_to_start), "s",
                 baseline_name="a tick that plans nothing", baseline=baseline, higher_is_better=False, note=note)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
