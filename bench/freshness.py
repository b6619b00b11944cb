"""Freshness: a user feed import request → its days recomputed in ``rnp_daily``, end to end.

    python bench/freshness.py [--quick] [--requests 6] [--days 14] [--background 1000] [--launcher celery]

The real deployment (`optima-pipelines dev`: daemon, code server, webserver) on a scratch database
and the WB simulator on localhost, with one simulated cabinet per request. Once every cabinet's
first increment and its re-aggregation are done (a deployment in its steady state), requests are
made one at a time, as the backend makes them (a row in ``requests``), each for one cabinet and
the last ``--days`` days; each is timed from the row's insertion until ``rnp_daily`` has a new
materialization of every day of [dateFrom, today] for that cabinet.

Baseline, same run: the work itself, i.e. the execution time of the import run (which recomputes
its own days' РНП) plus that of any re-aggregation run that wrote one of those days, each from its
start in its worker to its end. ``--launcher`` picks the run launcher (OPTIMA_RUN_LAUNCHER:
``celery``, warm run workers, the default, or ``spawn``, a new process per run).
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

TITLE = "user feed import request → its days recomputed in rnp_daily, through the real daemon: p50/p95"
OPTIONS = [
    Option("requests", 6, 2, "import requests (one cabinet each, made one at a time)"),
    Option("days", 14, 3, "days each import covers (dateFrom = today - days + 1)"),
    Option("background", 0, 0, "more cabinets the deployment syncs on its own cadences while the requests are timed"),
    Option("launcher", "celery", "celery", "OPTIMA_RUN_LAUNCHER of the deployment: celery or spawn", kind="str"),
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

    # Only this cabinet's days: with N cabinets syncing beside it, rnp_daily has thousands of others.
    records = stack.instance.fetch_materializations(
        AssetRecordsFilter(
            asset_key=AssetKey("rnp_daily"),
            after_storage_id=after,
            asset_partitions=[f"{cabinet}|{day}" for day in sorted(days)],
        ),
        limit=10_000,
    ).records
    mine = [r for r in records if r.partition_key and r.partition_key.startswith(f"{cabinet}|")]
    covered = {r.partition_key.split("|")[1] for r in mine}  # type: ignore[union-attr]
    return mine if days <= covered else None


def last_storage_id(stack: harness.Stack) -> int:
    from dagster import AssetKey

    records = stack.instance.fetch_materializations(AssetKey("rnp_daily"), limit=1).records
    return records[0].storage_id if records else 0


#: Where a request's time goes, in the order it passes: the requests sensor's tick, the import
#: run's wait in the queue plus its worker's start, the import itself, and the РНП of its days,
#: recomputed in the import's own run (or, when a re-aggregation run wrote the last day: the
#: re-aggregation sensor's tick, that run's queue and start, and its work).
IN_RUN = (
    "request → import run created (requests sensor tick)",
    "import run queued and started",
    "import run: the import, to its first РНП materialization",
    "import run: its days' РНП recomputed, to the last rnp_daily day",
)
BY_SENSOR = (
    "request → import run created (requests sensor tick)",
    "import run queued and started",
    "import run's work",
    "import run's end → re-aggregation run created (re-aggregation sensor tick)",
    "re-aggregation run queued and started",
    "re-aggregation run's work, to the last rnp_daily day",
)


def first_rnp_event(stack: harness.Stack, run_id: str) -> float | None:
    """When the run recorded its first materialization of a РНП asset (epoch seconds)."""
    from dagster import DagsterEventType

    times = [
        e.timestamp
        for e in stack.instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        if e.dagster_event is not None
        and e.dagster_event.asset_key is not None
        and e.dagster_event.asset_key.to_user_string().startswith("rnp_")
    ]
    return min(times) if times else None


def breakdown(stack: harness.Stack, started: float, import_run: str, records: list[Any]) -> dict[str, float]:
    """Seconds spent in each stage (IN_RUN or BY_SENSOR: the run that wrote the last day decides)."""
    from dagster import RunsFilter

    last = max(records, key=lambda r: r.timestamp)
    runs = {
        r.dagster_run.run_id: r for r in stack.instance.get_run_records(RunsFilter(run_ids=[import_run, last.run_id]))
    }
    imp, rnp = runs[import_run], runs[last.run_id]
    points = [started, imp.create_timestamp.timestamp(), imp.start_time or 0.0]
    if last.run_id == import_run:
        stages = IN_RUN
        points += [first_rnp_event(stack, import_run) or last.timestamp, last.timestamp]
    else:
        stages = BY_SENSOR
        points += [imp.end_time or 0.0, rnp.create_timestamp.timestamp(), rnp.start_time or 0.0, last.timestamp]
    return {stage: b - a for stage, (a, b) in zip(stages, pairwise(points), strict=True)}


def run_seconds(stack: harness.Stack, run_ids: set[str]) -> float:
    from dagster import RunsFilter

    records = stack.instance.get_run_records(RunsFilter(run_ids=list(run_ids)))
    return sum(r.end_time - r.start_time for r in records if r.start_time and r.end_time)


def run(bench: Bench, opts: Any) -> None:
    from wb_simulator import CabinetSpec

    cabinets = [f"fresh{i}" for i in range(1, opts.requests + 1)]
    specs = [CabinetSpec(id=c, products=30, orders_per_day=120, history_days=30) for c in cabinets]
    # Background cabinets (the scale bench's shape) keep the deployment's sweeps busy meanwhile.
    specs += [
        CabinetSpec(id=f"bg{i:04d}", products=10, orders_per_day=40, history_days=20) for i in range(opts.background)
    ]
    ends: list[float] = []
    works: list[float] = []
    stages: list[dict[str, float]] = []
    with bench.environment("fresh") as env:
        env.variables["OPTIMA_RUN_LAUNCHER"] = opts.launcher
        with harness.deployment(env, cabinets=specs) as stack:
            measure(stack, env, cabinets, opts, ends, works, stages)

    harness.say(f"  where the time goes, p50 over the requests (run launcher {opts.launcher}):")
    for stage in dict.fromkeys([*IN_RUN, *BY_SENSOR]):
        seen = [parts[stage] for parts in stages if stage in parts]
        if seen:
            harness.say(f"    {harness.quantile(seen, 0.5):6.1f} s  {stage} ({len(seen)} of {len(stages)} requests)")

    for q, label in ((0.5, "p50"), (0.95, "p95")):
        bench.figure(
            f"import request ({opts.days} days) → rnp_daily recomputed, {label} (n={len(ends)}, "
            f"{opts.background} cabinets in the background, run launcher {opts.launcher})",
            harness.quantile(ends, q),
            "s",
            baseline_name=f"the runs' own execution time, {label}",
            baseline=harness.quantile(works, q),
            higher_is_better=False,
        )


def measure(
    stack: harness.Stack,
    env: Any,
    cabinets: list[str],
    opts: Any,
    ends: list[float],
    works: list[float],
    stages: list[dict[str, float]],
) -> None:
    """The requests, one at a time, on the running deployment: their latency, work and stages."""
    from optima_pipelines.timeutil import today_moscow
    from optima_pipelines.warehouse import requests as outbox

    harness.say(
        f"  waiting for the first increment of {len(cabinets)} cabinets and its re-aggregation"
        f" ({opts.background} more cabinets in the background)..."
    )
    harness.wait_for(
        lambda: settled(stack, cabinets, quiet=not opts.background), "the deployment to settle", 1800, poll=5
    )
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

        def final(request_id: int = request_id) -> outbox.Request | None:
            # The import run writes its days' РНП before it ends (and marks its request).
            with env.connect() as conn:
                request = outbox.get_request(conn, request_id)
            return request if request.status not in ("pending", "running") else None

        request = harness.wait_for(final, f"request {request_id} to end", 600)
        if request.status != "succeeded" or request.run_id is None:
            raise RuntimeError(f"request {request_id} ended {request.status}: {request.error}")
        work = run_seconds(stack, {request.run_id} | {r.run_id for r in records})
        parts = breakdown(stack, started, request.run_id, records)
        harness.say(
            f"  {cabinet}: request → rnp_daily {latency:.1f} s (runs' own time {work:.1f} s): "
            + ", ".join(f"{stage.split(' (')[0]} {took:.1f} s" for stage, took in parts.items())
            + f" (load average {harness.load_average()})"
        )
        ends.append(latency)
        works.append(work)
        stages.append(parts)


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
