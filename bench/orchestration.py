"""Orchestration overhead: trivial queued runs through the real daemon, against the process floor.

    python bench/orchestration.py [--quick] [--sequential 10] [--burst 60] [--launchers spawn,celery,forkserver]

Starts the real deployment (`optima-pipelines dev -m bench.location`: code server, daemon, webserver
on the project's dagster.yaml, its run coordinator and queue) with a location whose only job does
nothing, and launches runs through the UI's GraphQL API, as a person or the backend would:

- one at a time (``--sequential``): each run's latency from its creation (queued) to SUCCESS;
- a burst (``--burst`` runs at once): runs/s from the first creation to the last success, and the
  latency of each run (its wait in the queue included).

The floor, measured in the same run: starting a Python process that imports dagster (every run
worker is such a process), and one that imports our definitions (what a production run worker
loads before its first line of work).

``--launchers``: the deployment is started once per launcher, one after the other, in the same run
(issue 17): ``spawn`` (Dagster's DefaultRunLauncher: the code server spawns a fresh process per
run), ``celery`` (OPTIMA_RUN_LAUNCHER=celery, the deployment's default: warm run workers fed by Celery on PostgreSQL, the
embedded default broker; ``celery-redis`` the same on the Redis at OPTIMA_BENCH_REDIS_URL, default
redis://127.0.0.1:6379/15), ``forkserver`` (the spawn launcher, its run workers forked from a
forkserver that preloaded Dagster and the definitions: OPTIMA_CODE_SERVER_FORKSERVER=1).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "trivial queued runs through the real daemon: runs/s, queue-to-success p50/p95, vs the process floor"
OPTIONS = [
    Option("sequential", 10, 3, "runs launched one at a time"),
    Option("burst", 60, 8, "runs launched at once"),
    Option("floor-repeat", 5, 2, "process starts timed for the floor (the median counts)"),
    Option("launchers", "spawn,celery", "spawn,celery", "run launchers measured, one deployment each", kind="str"),
]

LAUNCHER_ENV: dict[str, dict[str, str]] = {
    "spawn": {"OPTIMA_RUN_LAUNCHER": "spawn"},
    "celery": {"OPTIMA_RUN_LAUNCHER": "celery"},
    "celery-redis": {
        "OPTIMA_RUN_LAUNCHER": "celery",
        "OPTIMA_RUN_WORKER_BROKER_URL": os.environ.get("OPTIMA_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"),
    },
    "forkserver": {"OPTIMA_RUN_LAUNCHER": "spawn", "OPTIMA_CODE_SERVER_FORKSERVER": "1"},
}


def process_floor(code: str, repeat: int) -> float:
    """Median wall seconds of ``python -c code`` (interpreter start included)."""
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=harness.ROOT, capture_output=True)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def latencies(stack: harness.Stack, run_ids: list[str]) -> list[tuple[float, float]]:
    """(created, ended) epoch seconds of each run; raises if one did not succeed."""
    from dagster import DagsterRunStatus, RunsFilter

    records = stack.instance.get_run_records(RunsFilter(run_ids=run_ids))
    out = []
    for record in records:
        if record.dagster_run.status != DagsterRunStatus.SUCCESS:
            raise RuntimeError(f"run {record.dagster_run.run_id} ended {record.dagster_run.status}")
        out.append((record.create_timestamp.timestamp(), record.end_time))
    return out


#: The phases of a run's latency, each ending at the first event of its type.
PHASES = (
    ("queued → dequeued (the daemon's queue pass)", "RUN_STARTING"),
    ("dequeued → running (launch, broker, worker)", "RUN_START"),
    ("running → SUCCESS (the run's own events)", "RUN_SUCCESS"),
)


def phases(stack: harness.Stack, run_ids: list[str]) -> dict[str, float]:
    """p50 seconds of each phase of these runs, from their records and event logs."""
    from dagster import DagsterEventType, RunsFilter

    spans: dict[str, list[float]] = {name: [] for name, _ in PHASES}
    for record in stack.instance.get_run_records(RunsFilter(run_ids=run_ids)):
        at = record.create_timestamp.timestamp()
        for name, event in PHASES:
            logs = stack.instance.all_logs(record.dagster_run.run_id, of_type=DagsterEventType[event])
            if not logs:
                break
            spans[name].append(logs[0].timestamp - at)
            at = logs[0].timestamp
    return {name: harness.quantile(values, 0.5) for name, values in spans.items() if values}


def wait_finished(stack: harness.Stack, run_ids: list[str], timeout: float) -> None:
    from dagster import RunsFilter

    def done() -> bool:
        runs = stack.instance.get_runs(RunsFilter(run_ids=run_ids))
        return len(runs) == len(run_ids) and all(r.is_finished for r in runs)

    harness.wait_for(done, f"{len(run_ids)} trivial runs to finish", timeout)


def measure(bench: Bench, opts: Any, launcher: str) -> dict[str, Any]:
    """One deployment on ``launcher``: the sequential latencies and the burst."""
    with bench.environment(f"orch_{launcher.replace('-', '_')}") as env:
        env.variables.update(LAUNCHER_ENV[launcher])
        with harness.deployment(env, module="bench.location") as stack:
            # The daemon's first queue pass after a cold start is not what a run waits for: warm up.
            warm = stack.launch("trivial")
            wait_finished(stack, [warm], 180)

            sequential = []
            for _ in range(opts.sequential):
                run_id = stack.launch("trivial")
                wait_finished(stack, [run_id], 180)
                sequential.append(run_id)
            seq = [end - created for created, end in latencies(stack, sequential)]
            seq_load = harness.load_average()
            seq_phases = phases(stack, sequential)

            burst = [stack.launch("trivial") for _ in range(opts.burst)]
            wait_finished(stack, burst, 60 + 10 * opts.burst)
            times = latencies(stack, burst)
            burst_load = harness.load_average()
    burst_lat = [end - created for created, end in times]
    span = max(e for _, e in times) - min(c for c, _ in times)
    harness.say(
        f"  {launcher}: one at a time p50 {harness.quantile(seq, 0.5):.2f} s (load {seq_load:.2f}); "
        f"burst of {len(times)} {len(times) / span:.2f} runs/s (load {burst_load:.2f})"
    )
    harness.say(f"  {launcher}: one at a time, where it goes (p50 of each phase): " + "; ".join(
        f"{name} {seconds:.2f} s" for name, seconds in seq_phases.items()))  # fmt: skip
    return {
        "seq": seq,
        "seq_phases": seq_phases,
        "seq_load": seq_load,
        "times": times,
        "burst_lat": burst_lat,
        "span": span,
        "burst_load": burst_load,
    }


def run(bench: Bench, opts: Any) -> None:
    launchers = [name.strip() for name in str(opts.launchers).split(",") if name.strip()]
    unknown = [name for name in launchers if name not in LAUNCHER_ENV]
    if unknown:
        raise SystemExit(f"unknown launcher(s) {unknown}: choose among {sorted(LAUNCHER_ENV)}")
    dagster_floor = process_floor("import dagster", opts.floor_repeat)
    defs_floor = process_floor("import optima_pipelines.definitions", opts.floor_repeat)
    harness.say(f"  floor: python + import dagster {dagster_floor:.2f} s; + our definitions {defs_floor:.2f} s")
    results = {launcher: measure(bench, opts, launcher) for launcher in launchers}

    floor = "python process importing dagster"
    for launcher, r in results.items():
        seq, seq_load, times, burst_lat, span = r["seq"], r["seq_load"], r["times"], r["burst_lat"], r["span"]
        tag = f"[{launcher}] "
        bench.figure(f"{tag}trivial run queued → SUCCESS, one at a time, p50 (n={len(seq)})", harness.quantile(seq, 0.5), "s",
                     baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=seq_load)  # fmt: skip
        bench.figure(f"{tag}trivial run queued → SUCCESS, one at a time, p95 (n={len(seq)})", harness.quantile(seq, 0.95), "s",
                     baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=seq_load)  # fmt: skip
        bench.figure(f"{tag}trivial run queued → SUCCESS, one at a time, p50, vs our definitions' import",
                     harness.quantile(seq, 0.5), "s", baseline_name="python process importing optima_pipelines.definitions",
                     baseline=defs_floor, higher_is_better=False, load=seq_load)  # fmt: skip
        bench.figure(f"{tag}burst of {len(times)} trivial runs: throughput", len(times) / span, "runs/s",
                     baseline_name="dagster-importing processes/s, one at a time", baseline=1 / dagster_floor,
                     higher_is_better=True, load=r["burst_load"])  # fmt: skip
        bench.figure(f"{tag}burst of {len(times)} trivial runs: queued → SUCCESS p50", harness.quantile(burst_lat, 0.5), "s",
                     baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=r["burst_load"])  # fmt: skip
        bench.figure(f"{tag}burst of {len(times)} trivial runs: queued → SUCCESS p95", harness.quantile(burst_lat, 0.95), "s",
                     baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=r["burst_load"])  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
