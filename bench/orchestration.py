"""Orchestration overhead: trivial queued runs through the real daemon, against the process floor.

    python bench/orchestration.py [--quick] [--sequential 10] [--burst 60]

Starts the real deployment (`optima-pipelines dev -m bench.location`: code server, daemon, webserver
on the project's dagster.yaml, its run coordinator and queue) with a location whose only job does
nothing, and launches runs through the UI's GraphQL API, as a person or the backend would:

- one at a time (``--sequential``): each run's latency from its creation (queued) to SUCCESS;
- a burst (``--burst`` runs at once): runs/s from the first creation to the last success, and the
  latency of each run (its wait in the queue included).

The floor, measured in the same run: starting a Python process that imports dagster (every run
worker is such a process), and one that imports our definitions (what a production run worker
loads before its first line of work).
"""

from __future__ import annotations

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

NAME = "orchestration"
TITLE = "trivial queued runs through the real daemon: runs/s, queue-to-success p50/p95, vs the process floor"
OPTIONS = [
    Option("sequential", 10, 3, "runs launched one at a time"),
    Option("burst", 60, 8, "runs launched at once"),
    Option("floor-repeat", 5, 2, "process starts timed for the floor (the median counts)"),
]


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


def wait_finished(stack: harness.Stack, run_ids: list[str], timeout: float) -> None:
    from dagster import RunsFilter

    def done() -> bool:
        runs = stack.instance.get_runs(RunsFilter(run_ids=run_ids))
        return len(runs) == len(run_ids) and all(r.is_finished for r in runs)

    harness.wait_for(done, f"{len(run_ids)} trivial runs to finish", timeout)


def run(bench: Bench, opts: Any) -> None:
    dagster_floor = process_floor("import dagster", opts.floor_repeat)
    defs_floor = process_floor("import optima_pipelines.definitions", opts.floor_repeat)
    harness.say(f"  floor: python + import dagster {dagster_floor:.2f} s; + our definitions {defs_floor:.2f} s")
    with bench.environment("orch") as env, harness.deployment(env, module="bench.location") as stack:
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

        burst = [stack.launch("trivial") for _ in range(opts.burst)]
        wait_finished(stack, burst, 60 + 10 * opts.burst)
        times = latencies(stack, burst)
        burst_lat = [end - created for created, end in times]
        span = max(e for _, e in times) - min(c for c, _ in times)

    floor = "python process importing dagster"
    bench.figure(f"trivial run queued → SUCCESS, one at a time, p50 (n={len(seq)})", harness.quantile(seq, 0.5), "s",
                 baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=seq_load)  # fmt: skip
    bench.figure(f"trivial run queued → SUCCESS, one at a time, p95 (n={len(seq)})", harness.quantile(seq, 0.95), "s",
                 baseline_name=floor, baseline=dagster_floor, higher_is_better=False, load=seq_load)  # fmt: skip
    bench.figure("trivial run queued → SUCCESS, one at a time, p50, vs our definitions' import",
                 harness.quantile(seq, 0.5), "s", baseline_name="python process importing optima_pipelines.definitions",
                 baseline=defs_floor, higher_is_better=False, load=seq_load)  # fmt: skip
    bench.figure(f"burst of {len(times)} trivial runs: throughput", len(times) / span, "runs/s",
                 baseline_name="dagster-importing processes/s, one at a time", baseline=1 / dagster_floor,
                 higher_is_better=True)  # fmt: skip
    bench.figure(f"burst of {len(times)} trivial runs: queued → SUCCESS p50", harness.quantile(burst_lat, 0.5), "s",
                 baseline_name=floor, baseline=dagster_floor, higher_is_better=False)  # fmt: skip
    bench.figure(f"burst of {len(times)} trivial runs: queued → SUCCESS p95", harness.quantile(burst_lat, 0.95), "s",
                 baseline_name=floor, baseline=dagster_floor, higher_is_better=False)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
