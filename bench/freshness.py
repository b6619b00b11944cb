"""Freshness: a user feed import request → its days recomputed in ``rnp_daily``, end to end.

    python bench/freshness.py [--quick] [--requests 6] [--days 14] [--background 1000]

The real deployment (`optima-pipelines dev`: daemon, code server, webserver) on a scratch database
and the WB simulator on localhost, with one simulated cabinet per request. Once every cabinet's
first increment and its re-aggregation are done (a deployment in its steady state), requests are
made one at a time, as the backend makes them (a row in ``requests``), each for one cabinet and
the last ``--days`` days; each is timed from the row's insertion until ``rnp_daily`` has a new
materialization of every day of [dateFrom, today] for that cabinet.

Baseline, same run: the work itself, i.e. the execution time of the import run plus that of the
re-aggregation run(s) that recomputed those days, each from its start in its worker to its end.
The difference is what the orchestration adds: sensor intervals, the queue, the run workers'
start-up. ``--background N`` adds N cabinets the deployment syncs on its own cadences (sweeps)
all along, to time the requests under that load.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

NAME = "freshness"
TITLE = "user feed import request → its days recomputed in rnp_daily, through the real daemon: p50/p95"
OPTIONS = [
    Option("requests", 6, 2, "import requests (one cabinet each, made one at a time)"),
    Option("days", 14, 3, "days each import covers (dateFrom = today - days + 1)"),
    Option("background", 0, 0, "more cabinets the deployment syncs on its own cadences while the requests are timed"),
]


def settled(stack: harness.Stack, cabinets: list[str], quiet: bool = True) -> bool:
    """Every cabinet's first increment succeeded (in a sweep) and re-aggregated, and (``quiet``)
    nothing is queued or running."""
    from dagster import DagsterRunStatus, RunsFilter

    with stack.env.connect() as conn:
        synced = {
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT cabinet_id FROM optima_{stack.env.env}.sweep_outcomes "
                "WHERE job = 'digitization_increment_sweep' AND outcome = 'succeeded' AND cabinet_id = ANY(%s)",
                (cabinets,),
            )
        }
        filled = conn.execute(
            "SELECT count(DISTINCT cabinet_id) FROM rnp_daily WHERE cabinet_id = ANY(%s)", (cabinets,)
        ).fetchone()[0]  # type: ignore[index]
    if not set(cabinets) <= synced or filled != len(cabinets):
        return False
    if not quiet:
        return True
    active = stack.instance.get_runs_count(
        RunsFilter(statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED])
    )
    return active == 0


def recomputed(stack: harness.Stack, cabinet: str, days: set[str], after: int) -> list[Any] | None:
    """The rnp_daily materializations after ``after`` that cover ``days`` of the cabinet, else None."""
    from dagster import AssetKey, AssetRecordsFilter

    records = stack.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("rnp_daily"), after_storage_id=after), limit=10_000
    ).records
    mine = [r for r in records if r.partition_key and r.partition_key.startswith(f"{cabinet}|")]
    covered = {r.partition_key.split("|")[1] for r in mine}  # type: ignore[union-attr]
    return mine if days <= covered else None


def last_storage_id(stack: harness.Stack) -> int:
    from dagster import AssetKey

    records = stack.instance.fetch_materializations(AssetKey("rnp_daily"), limit=1).records
    return records[0].storage_id if records else 0


#: Where a request's time goes, in the order it passes: the two sensors' ticks, each run's wait in
#: the queue plus its worker's start (a new process importing Dagster and our definitions), and the
#: runs' own work.
STAGES = (
    "request → import run created (requests sensor tick)",
    "import run queued and started",
    "import run's work",
    "import run's end → re-aggregation run created (re-aggregation sensor tick)",
    "re-aggregation run queued and started",
    "re-aggregation run's work, to the last rnp_daily day",
)


def breakdown(stack: harness.Stack, started: float, import_run: str, records: list[Any]) -> list[float]:
    """Seconds spent in each of STAGES (the re-aggregation: the run that wrote the last day)."""
    from dagster import RunsFilter

    last = max(records, key=lambda r: r.timestamp)
    runs = {
        r.dagster_run.run_id: r for r in stack.instance.get_run_records(RunsFilter(run_ids=[import_run, last.run_id]))
    }
    imp, rnp = runs[import_run], runs[last.run_id]
    points = [
        started,
        imp.create_timestamp.timestamp(),
        imp.start_time or 0.0,
        imp.end_time or 0.0,
        rnp.create_timestamp.timestamp(),
        rnp.start_time or 0.0,
        last.timestamp,
    ]
    return [b - a for a, b in pairwise(points)]


def run_seconds(stack: harness.Stack, run_ids: set[str]) -> float:
    from dagster import RunsFilter

    records = stack.instance.get_run_records(RunsFilter(run_ids=list(run_ids)))
    return sum(r.end_time - r.start_time for r in records if r.start_time and r.end_time)


def run(bench: Bench, opts: Any) -> None:
    from optima_pipelines.timeutil import today_moscow
    from optima_pipelines.warehouse import requests as outbox
    from wb_simulator import CabinetSpec

    cabinets = [f"fresh{i}" for i in range(1, opts.requests + 1)]
    specs = [CabinetSpec(id=c, products=30, orders_per_day=120, history_days=30) for c in cabinets]
    # Background cabinets (the scale bench's shape) keep the deployment's sweeps busy meanwhile.
    specs += [
        CabinetSpec(id=f"bg{i:04d}", products=10, orders_per_day=40, history_days=20) for i in range(opts.background)
    ]
    with bench.environment("fresh") as env, harness.deployment(env, cabinets=specs) as stack:
        harness.say(
            f"  waiting for the first increment of {len(cabinets)} cabinets and its re-aggregation"
            f" ({opts.background} more cabinets in the background)..."
        )
        harness.wait_for(
            lambda: settled(stack, cabinets, quiet=not opts.background), "the deployment to settle", 1800, poll=5
        )
        ends, works, stages = [], [], []
        for cabinet in cabinets:
            today = today_moscow()
            first = today - timedelta(days=opts.days - 1)
            days = {(first + timedelta(n)).isoformat() for n in range(opts.days)}
            after = last_storage_id(stack)
            started = time.time()
            with env.connect() as conn:
                request_id = outbox.create_request(conn, "import-user-feeds", cabinet, {"dateFrom": first.isoformat()})
            records = harness.wait_for(
                lambda cabinet=cabinet, days=days, after=after: recomputed(stack, cabinet, days, after),
                f"rnp_daily of {cabinet} after request {request_id}",
                600,
            )
            latency = max(r.timestamp for r in records) - started
            with env.connect() as conn:
                request = outbox.get_request(conn, request_id)
            if request.status != "succeeded" or request.run_id is None:
                raise RuntimeError(f"request {request_id} ended {request.status}: {request.error}")
            work = run_seconds(stack, {request.run_id} | {r.run_id for r in records})
            parts = breakdown(stack, started, request.run_id, records)
            harness.say(
                f"  {cabinet}: request → rnp_daily {latency:.1f} s (runs' own time {work:.1f} s): "
                + ", ".join(f"{p:.1f}" for p in parts)
                + f" s (load average {harness.load_average()})"
            )
            ends.append(latency)
            works.append(work)
            stages.append(parts)

    harness.say("  where the time goes, p50 over the requests:")
    for i, stage in enumerate(STAGES):
        harness.say(f"    {harness.quantile([s[i] for s in stages], 0.5):6.1f} s  {stage}")

    for q, label in ((0.5, "p50"), (0.95, "p95")):
        bench.figure(
            f"import request ({opts.days} days) → rnp_daily recomputed, {label} (n={len(ends)}, "
            f"{opts.background} cabinets in the background)",
            harness.quantile(ends, q),
            "s",
            baseline_name=f"the runs' own execution time, {label}",
            baseline=harness.quantile(works, q),
            higher_is_better=False,
        )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
