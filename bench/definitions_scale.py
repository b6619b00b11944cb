"""Definitions and sensors at scale: 1,000 cabinets × 2 years of partitions.

    python bench/definitions_scale.py [--quick] [--cabinets 1000] [--days 730] [--events 1000000] [--runs 100000]

A deployment with ``--cabinets`` active cabinets (the cabinets table and the dynamic partition
dimension), ``OPTIMA_PARTITIONS_START`` ``--days`` back, ``--events`` feed materializations in the
event log (one increment's events per cabinet reported through Dagster's API, then multiplied by
bulk SQL into the same table), that increment's РНП pairs due (``harness.report_increment``) and
``--runs`` finished runs with our tags. Measured in a fresh process (the partitions are declared at import):

- definitions load: ``import optima_pipelines.definitions`` and the repository resolved;
- each sensor's and schedule's tick: every one ``definitions.py`` registers, evaluated as the
  daemon does (``evaluate_tick``) with the deployment's instance and resources (median of 3); the
  re-aggregation sensor plans the pairs one increment made due (``--cabinets`` × 2 days).

Baselines, same run: the same process measurements on an empty deployment (one cabinet, no
history, the default partitions start), and ``import dagster`` alone for the load time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "definitions load and every sensor's/schedule's tick with 1,000 cabinets × 2 years of partitions"
OPTIONS = [
    Option("cabinets", 1000, 30, "active cabinets (dynamic partitions)"),
    Option("days", 730, 730, "days of partitions (OPTIMA_PARTITIONS_START this many days back)"),
    Option("events", 1_000_000, 20_000, "feed materializations in the event log"),
    Option("runs", 100_000, 2_000, "finished runs in Dagster's run storage"),
]
FEEDS = ("wb_orders", "wb_sales")


def child() -> None:
    """In a fresh process (the environment is the deployment's): time the load and every tick."""
    started = time.perf_counter()
    import dagster  # noqa: F401

    dagster_s = time.perf_counter() - started
    from optima_pipelines.definitions import RESOURCES, defs

    repo = defs.get_repository_def()
    repo.get_all_jobs()
    load_s = time.perf_counter() - started

    from dagster import DagsterInstance, build_schedule_context, build_sensor_context

    ticks: dict[str, float] = {}
    with DagsterInstance.get() as instance:
        for sensor in repo.sensor_defs:
            timings = []
            for _ in range(3):
                with build_sensor_context(
                    instance=instance,
                    resources=RESOURCES,
                    definitions=defs,
                ) as context:
                    t = time.perf_counter()
                    sensor.evaluate_tick(context)
                    timings.append(time.perf_counter() - t)
            ticks[f"sensor {sensor.name}"] = statistics.median(timings)
        for schedule in repo.schedule_defs:
            timings = []
            for _ in range(3):
                with build_schedule_context(
                    instance=instance, resources=RESOURCES, scheduled_execution_time=datetime.now(UTC)
                ) as context:
                    t = time.perf_counter()
                    schedule.evaluate_tick(context)
                    timings.append(time.perf_counter() - t)
            ticks[f"schedule {schedule.name}"] = statistics.median(timings)
    print(json.dumps({"dagster_import": dagster_s, "definitions": load_s, "ticks": ticks}))


def measure_child(env: harness.Environment) -> dict[str, Any]:
    code = "from bench.definitions_scale import child; child()"
    variables = {**os.environ, **env.variables}
    variables["PYTHONPATH"] = os.pathsep.join(filter(None, [str(harness.ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code], env=variables, cwd=harness.ROOT, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fill(env: harness.Environment, cabinets: int, events: int, runs: int) -> None:
    with env.instance() as instance:  # creates Dagster's tables
        ids = harness.add_offline_cabinets(env, instance, cabinets)
        with env.connect() as conn:
            harness.fill_runs(conn, f"dagster_{env.env}", runs, cabinets, in_flight=False)
        harness.report_increment(env, instance, ids, FEEDS)
    schema = f"dagster_{env.env}"
    # The oldest N materializations again, as new rows (new storage ids).
    copy_oldest = f"""INSERT INTO {schema}.event_logs (run_id, event, dagster_event_type, timestamp, step_key,
                                                      asset_key, partition)
        SELECT run_id, event, dagster_event_type, timestamp, step_key, asset_key, partition
        FROM {schema}.event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'
        ORDER BY id LIMIT %s"""
    with env.connect() as conn:
        # Older history: the same rows again (new storage ids) until the event log holds `events`.
        while True:
            count = conn.execute(
                f"SELECT count(*) FROM {schema}.event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
            ).fetchone()[0]  # type: ignore[index]
            if count >= events:
                break
            conn.execute(copy_oldest, (events - count,))
        # The newest increment last, as in production.
        conn.execute(copy_oldest, (cabinets * len(FEEDS) * 2,))
        conn.execute(f"ANALYZE {schema}.event_logs")


def run(bench: Bench, opts: Any) -> None:
    from optima_pipelines.timeutil import today_moscow

    start = (today_moscow() - timedelta(days=opts.days)).isoformat()
    with bench.environment("defsbase") as env:
        with env.connect() as conn:
            conn.execute("INSERT INTO cabinets (id, name) VALUES ('c0001', 'C0001')")
        base = measure_child(env)
    with bench.environment("defsscale", OPTIMA_PARTITIONS_START=start) as env:
        started = time.perf_counter()
        fill(env, opts.cabinets, opts.events, opts.runs)
        harness.say(f"  filled {opts.cabinets} cabinets, {opts.events:,} events, {opts.runs:,} runs in "
                    f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        scaled = measure_child(env)
    size = f"{opts.cabinets} cabinets × {opts.days} days"
    bench.figure("definitions load (import + repository)", scaled["definitions"], "s",
                 baseline_name="import dagster alone", baseline=scaled["dagster_import"], higher_is_better=False,
                 note=f"partitions from {start}")  # fmt: skip
    bench.figure("definitions load (import + repository), vs empty deployment", scaled["definitions"], "s",
                 baseline_name="same, empty deployment", baseline=base["definitions"], higher_is_better=False)  # fmt: skip
    for name, seconds in scaled["ticks"].items():
        bench.figure(f"{name} tick, {size}", seconds * 1000, "ms", baseline_name="same tick, empty deployment",
                     baseline=base["ticks"].get(name, 0) * 1000 or None, higher_is_better=False,
                     note=f"{opts.events:,} feed events, {opts.runs:,} runs")  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
