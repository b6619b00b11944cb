"""Scale: N cabinets with every schedule and sensor on, for a fixed wall time; which cadences hold.

    python bench/scale.py [--quick] [--cabinets 200,1000] [--cadence-scale 1] [--wall 2100] [--warmup 300]
                          [--sync-concurrency 5] [--max-runs 8] [--landing on|off] [--freshness on|off]

For each N, the real deployment (`optima-pipelines dev`) on a scratch database and the WB
simulator on localhost with N cabinets (its clock and WB's rate limits ``--time-scale`` times
faster), every schedule and sensor of the code location in its default state (whatever
``orchestration/cadences.py``/``definitions.py`` register when this runs: new syncs and engines are picked up
without changes here). After ``--warmup`` seconds (the first increment's catch-up), the deployment
is watched for ``--wall`` seconds:

- **cadences held**: for every cadence of ``orchestration/cadences.py`` that launches a job with a cadence
  window, each (cabinet, window) must get a run of that job that leaves the queue within the
  window and is not skipped as account-busy (a sensor that runs only for cabinets with work to do,
  ``on_demand``, must have every run it launched leave the queue within the window instead); cron
  cadences whose time does not come within the measured period are listed as not due. Every
  sensor must tick at least every max(2 × its interval, interval + 30 s);
- **CPU and memory** of the deployment's processes (psutil over the process tree of
  `optima-pipelines dev`: code server, daemon, webserver, metrics and every run worker), by
  process kind, and of the PostgreSQL backends serving this database (sampled every 2 s).

Sweeps: a scheduled cadence runs one run per window over every due cabinet (jobs/wb_sync.py), so a
(cabinet, window) is held when the cabinet's work in a sweep launched for that window ended
(``sweep_outcomes``: succeeded, or deferred by WB) within the window, or when a single-cabinet run
of it left the queue within the window. Also printed: **CPU-seconds per cabinet-hour** (the
deployment's processes and this database's PostgreSQL backends; the WB simulator, which serves from
threads of this process, apart), **runs created per hour** and the **bytes landed** (Parquet, per
cabinet-day). ``--landing off`` and ``--freshness off`` run the same deployment without the raw
landing or without the freshness checks' sensor: one run with and one without tells what each costs
at N (docs/performance.md).

Time scaling: by default the real cadences (the increment every 30 min, ads 5 min, the funnel 1 h,
prices 30 min) and a watch of 35 min, long enough to judge whole windows of every interval cadence;
``--cadence-scale`` runs the per-cabinet interval cadences that many times more often
(OPTIMA_CADENCE_SCALE) for a shorter drill, crons keeping their wall-clock times. WB's limits run
``--time-scale`` times faster. A window is judged only when it lies whole inside the watch.
Baselines: each figure at the smallest N of the same run.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

from bench import harness
from bench.harness import Bench, Option

TITLE = "N cabinets, every schedule and sensor on, fixed wall time: cadences held, CPU, memory"
OPTIONS = [
    Option("cabinets", [200, 1000], [3], "numbers of cabinets N", kind="ints"),
    Option("cadence-scale", 1.0, 10.0, "the per-cabinet interval cadences run this much more often", kind="float"),
    Option("wall", 2100, 45, "seconds watched per N, after the warm-up (35 min: every interval cadence's windows)"),
    Option("warmup", 300, 20, "seconds before watching (the first increment's catch-up)"),
    Option(
        "align",
        1800,
        0,
        "after the warm-up, wait for the next multiple of this many seconds (epoch) before watching, so that "
        "a watch of --wall 2100 holds a whole 30-min window of the increment and the prices (0: no wait)",
    ),
    Option("time-scale", 60.0, 60.0, "the simulator's clock and WB's limits run this much faster", kind="float"),
    Option("sync-concurrency", 5, 5, "SYNC_QUEUE_CONCURRENCY of the deployment (its default: 5)"),
    Option(
        "max-runs",
        8,
        8,
        "OPTIMA_MAX_CONCURRENT_RUNS of the deployment (its default: 8, of which the user lane keeps 2)",
    ),
    Option(
        "landing",
        "on",
        "on",
        "the raw landing of WB's answers (OPTIMA_LANDING_URL): on (the state folder's, the default) or off; "
        "run once with each to see its cost at N",
        kind="str",
    ),
    Option(
        "freshness",
        "on",
        "on",
        "the freshness checks' sensor (feed_freshness_sensor, one read of every cabinet's feeds a tick): on (the "
        "default) or off, stopped before the warm-up; run once with each to see its cost at N (the confirmation "
        "each sync writes stays: bench/freshness_bookkeeping.py measures it)",
        kind="str",
    ),
]

SENSOR_TICKS = """
query($sel: RepositorySelector!) {
  repositoryOrError(repositorySelector: $sel) {
    ... on Repository {
      sensors { name minIntervalSeconds sensorState { status ticks(limit: 3000) { status timestamp } } }
      schedules { name cronSchedule scheduleState { status ticks(limit: 50) { status timestamp } } }
    }
  }
}
"""


def process_kind(proc: psutil.Process) -> str:
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    for needle, kind in (
        # Run workers are spawned by the code server (multiprocessing "spawn", DESIGN.md §4.18),
        # with their resource tracker. (A step's compute log is copied by a thread of its own process,
        # orchestration/compute_logs.py: no `tail` or orphan watcher per step.)
        ("multiprocessing", "run workers"),
        ("orchestration.run_workers", "run workers"),  # the warm run workers (OPTIMA_RUN_LAUNCHER=celery)
        ("execute_run", "run workers"),
        ("dagster-daemon", "daemon"),
        ("operations.daemon", "daemon"),
        ("serve daemon", "daemon"),
        ("serve webserver", "webserver"),
        ("dagster-webserver", "webserver"),
        ("code-server", "code server"),
        ("api grpc", "code server"),
        ("cli metrics", "metrics"),
        ("cli dev", "dev supervisor"),
        ("serve ", "dev supervisor"),
    ):
        if needle in cmd:
            return kind
    harness.say(f"    (unclassified process: {cmd[:160]})")
    return "other"


def tree_cpu(roots: list[psutil.Process]) -> float:
    """CPU seconds of these processes and every descendant, those that ended included: a process
    that ended was reaped by its parent, whose children_user/children_system hold its time (and its
    own reaped children's), so each live process counts its own and its reaped children's time."""
    seen: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            for proc in [root, *root.children(recursive=True)]:
                seen[proc.pid] = proc
        except psutil.Error:
            continue
    total = 0.0
    for proc in seen.values():
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def postgres_processes() -> list[psutil.Process]:
    """The PostgreSQL server's postmaster(s): the postgres processes whose parent is not one."""
    out = []
    for proc in psutil.process_iter(["name", "ppid"]):
        try:
            if proc.info["name"] == "postgres" and psutil.Process(proc.info["ppid"]).name() != "postgres":
                out.append(proc)
        except psutil.Error:
            continue
    return out


class Imports(threading.Thread):
    """A user's feed import (3 days) every ``every`` seconds during the watch, each on another
    cabinet, timed from its request row to its days in rnp_daily (bench/freshness.py's measure),
    while the N cabinets' cadences run."""

    def __init__(self, stack: harness.Stack, cabinets: list[str], every: float, days: int = 3) -> None:
        super().__init__(daemon=True)
        self.stack, self.cabinets, self.every, self.days = stack, cabinets, every, days
        self.latencies: list[float] = []
        self.failed: list[str] = []
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)  # an import still being timed is left out, not waited for

    def run(self) -> None:
        from datetime import timedelta

        from bench.freshness import last_storage_id, recomputed
        from optima_pipelines.timeutil import today_moscow
        from optima_pipelines.warehouse import requests as outbox

        k = 0
        while not self._stop_event.wait(self.every if k else 60):
            cabinet = self.cabinets[(k * 97) % len(self.cabinets)]
            k += 1
            first = today_moscow() - timedelta(days=self.days - 1)
            days = {(first + timedelta(n)).isoformat() for n in range(self.days)}
            after = last_storage_id(self.stack)
            with self.stack.env.connect() as conn:
                outbox.create_request(conn, "import-user-feeds", cabinet, {"dateFrom": first.isoformat()})
            started = time.time()
            while (
                time.time() - started < 600
                and not self._stop_event.is_set()
                and not recomputed(self.stack, cabinet, days, after)
            ):
                time.sleep(0.5)
            if self._stop_event.is_set():
                break
            if recomputed(self.stack, cabinet, days, after):
                self.latencies.append(time.time() - started)
                harness.say(f"    import of {cabinet} ({self.days} days) → rnp_daily: {self.latencies[-1]:.1f} s")
            else:
                self.failed.append(cabinet)
                harness.say(f"    import of {cabinet}: its days not in rnp_daily after 600 s")


@dataclass
class Sampler:
    """CPU (by process kind) and memory of the deployment's tree, CPU of this database's PostgreSQL
    backends (a backend that lives less than ``every`` seconds is missed: the machine's busy cores
    are the cross-check), and the run queue's length, every ``every`` seconds on a thread."""

    root_pid: int
    env: harness.Environment
    every: float = 2.0
    cpu_by_kind: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    peak_rss: float = 0.0
    rss_total: float = 0.0
    rss_samples: int = 0
    postgres_cpu: float = 0.0
    #: This database's backend CPU by pg_stat_activity's application_name (a run's warehouse
    #: connections carry its job: ``optima_pipelines/<job>``; Dagster's storage connections none).
    postgres_by_app: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: Each run worker process's CPU over the watch as sampled (pid → seconds): what a run cost in
    #: its own process, the at most ``every`` seconds before it ended excepted.
    run_process_cpu: dict[int, float] = field(default_factory=dict)
    machine_busy: float = 0.0  # CPU seconds of the whole machine, every process (other users' too)
    peak_queued: int = 0
    #: CPU seconds of the deployment's whole process tree, run workers that ended included, and of
    #: the PostgreSQL server's processes (every database of it), over the watch.
    deployment_total: float = 0.0
    server_total: float = 0.0
    started: float = 0.0
    stopped: float = 0.0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._last: dict[int, tuple[str, float]] = {}
        self._pg_last: dict[int, float] = {}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.started = time.monotonic()
        self._machine_at_start = self._machine_cpu()
        self._tree_at_start = tree_cpu([psutil.Process(self.root_pid)])
        self._server_at_start = tree_cpu(postgres_processes())
        self._conn = self.env.connect()
        self._sample(count=False)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.stopped = time.monotonic()
        self.machine_busy = self._machine_cpu() - self._machine_at_start
        self.deployment_total = tree_cpu([psutil.Process(self.root_pid)]) - self._tree_at_start
        self.server_total = tree_cpu(postgres_processes()) - self._server_at_start
        self._conn.close()

    @staticmethod
    def _machine_cpu() -> float:
        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0) - getattr(t, "guest", 0.0)

    @property
    def seconds(self) -> float:
        return max(1e-9, self.stopped - self.started)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self, count: bool = True) -> None:
        root = psutil.Process(self.root_pid)
        procs = [root, *root.children(recursive=True)]
        rss = 0.0
        for proc in procs:
            try:
                times = proc.cpu_times()
                cpu = times.user + times.system
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
            if proc.pid in self._last:
                kind, before = self._last[proc.pid]
            else:  # new since the last sample: all its CPU was spent in the period
                kind, before = process_kind(proc), (0.0 if count else cpu)
            if count:
                self.cpu_by_kind[kind] += cpu - before
                if kind == "run workers":
                    self.run_process_cpu[proc.pid] = self.run_process_cpu.get(proc.pid, 0.0) + cpu - before
            self._last[proc.pid] = (kind, cpu)
        conn = self._conn
        backends = conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
        for pid, application in backends:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            cpu = times.user + times.system
            if count:  # a backend new since the last sample spent all its CPU in the period
                spent = cpu - self._pg_last.get(pid, 0.0)
                self.postgres_cpu += spent
                self.postgres_by_app[application or "(no application_name: Dagster's storage)"] += spent
            self._pg_last[pid] = cpu
        if count:
            self.peak_rss = max(self.peak_rss, rss)
            self.rss_total += rss
            self.rss_samples += 1
            schema = f"dagster_{self.env.env}"
            queued = conn.execute(f"SELECT count(*) FROM {schema}.runs WHERE status = 'QUEUED'").fetchone()[0]  # type: ignore[index]
            self.peak_queued = max(self.peak_queued, int(queued))

    def cores(self) -> dict[str, float]:
        out = {k: v / self.seconds for k, v in sorted(self.cpu_by_kind.items(), key=lambda kv: -kv[1])}
        out["postgres (this database)"] = self.postgres_cpu / self.seconds
        return out

    def machine_cores(self) -> float:
        return self.machine_busy / self.seconds


@dataclass
class CadenceResult:
    name: str
    held: int = 0
    expected: int = 0
    skipped_busy: int = 0
    late: int = 0
    note: str = ""

    @property
    def share(self) -> float | None:
        return None if not self.expected else self.held / self.expected


def run_served(r: Any, window: int) -> bool:
    """A single-cabinet run left the queue within its window, not skipped as account-busy."""
    from optima_pipelines.orchestration.queues import SKIPPED_ACCOUNT_BUSY, TAG_SKIPPED

    busy = r.dagster_run.tags.get(TAG_SKIPPED) == SKIPPED_ACCOUNT_BUSY
    return bool(r.start_time and not busy and r.start_time - r.create_timestamp.timestamp() <= window)


def sweep_served(outcome: str, finished: float, created: float, window: int) -> bool:
    """A sweep's cabinet whose work ended (done, or deferred by WB) within the window it was launched for."""
    return outcome in ("succeeded", "deferred") and finished - created <= window


def judge_cadences(stack: harness.Stack, cabinets: list[str], start: float, end: float) -> list[CadenceResult]:
    """Every cadence with a job and a window, over the measured period [start, end] (epoch s)."""
    from dagster import RunsFilter

    from optima_pipelines.orchestration.cadences import cadences
    from optima_pipelines.orchestration.queues import SKIPPED_ACCOUNT_BUSY, TAG_CABINET, TAG_SKIPPED, TAG_WINDOW

    results = []
    for cadence in cadences():
        if not cadence.job or not cadence.window_seconds:
            continue
        window = cadence.window_seconds
        result = CadenceResult(cadence.name)
        records = [
            r
            for r in stack.instance.get_run_records(RunsFilter(job_name=cadence.job))
            if start - window <= r.create_timestamp.timestamp() <= end
        ]
        for r in records:
            created = r.create_timestamp.timestamp()
            if r.dagster_run.tags.get(TAG_SKIPPED) == SKIPPED_ACCOUNT_BUSY:
                result.skipped_busy += 1
            left_queue = r.start_time if r.start_time else (end if not r.dagster_run.is_finished else None)
            if left_queue is not None and left_queue - created > window:
                result.late += 1
        swept = (
            outcomes_by_run(stack, [r.dagster_run.run_id for r in records]) if cadence.job.endswith("_sweep") else {}
        )
        for rows in swept.values():
            result.skipped_busy += sum(outcome == "skipped" for _, outcome, _ in rows)
        if cadence.interval_seconds and not cadence.on_demand:
            first, last = math.ceil(start / window), math.floor(end / window) - 1
            windows = range(first, last + 1)
            served: set[tuple[str, int]] = set()
            for r in records:
                cabinet = r.dagster_run.tags.get(TAG_CABINET)
                created = r.create_timestamp.timestamp()
                if cabinet and run_served(r, window):
                    served.add((cabinet, int(created // window)))
                for swept_cabinet, outcome, finished in swept.get(r.dagster_run.run_id, []):
                    if sweep_served(outcome, finished, created, window):
                        served.add((swept_cabinet, int(created // window)))
            result.expected = len(cabinets) * len(windows)
            result.held = sum((c, k) in served for c in cabinets for k in windows)
            result.note = f"{len(windows)} windows of {window} s × {len(cabinets)} cabinets"
        elif records:
            # A cron's ticks: each single-cabinet run, held when it left the queue within the window;
            # and each cabinet of each tick's sweeps (a sweep per shard, and the catch-up's runs of
            # the same window, `optima/window`), held when one of them ended its work (done, or
            # deferred by WB) within the window from the tick's first run.
            result.expected = result.held = 0
            ticks: dict[str, float] = {}
            for r in records:
                if r.dagster_run.run_id in swept:
                    tick = r.dagster_run.tags.get(TAG_WINDOW, r.dagster_run.run_id)
                    ticks[tick] = min(ticks.get(tick, math.inf), r.create_timestamp.timestamp())
            due: set[tuple[str, str]] = set()
            done: set[tuple[str, str]] = set()
            for r in records:
                if r.dagster_run.run_id in swept:
                    tick = r.dagster_run.tags.get(TAG_WINDOW, r.dagster_run.run_id)
                    for cabinet, outcome, finished in swept[r.dagster_run.run_id]:
                        due.add((tick, cabinet))
                        if sweep_served(outcome, finished, ticks[tick], window):
                            done.add((tick, cabinet))
                else:
                    result.expected += 1
                    result.held += run_served(r, window)
            result.expected += len(due)
            result.held += len(done)
            result.note = f"{len(records)} runs of its ticks, {result.expected} cabinet-ticks"
        elif cadence.on_demand:
            result.note = "no cabinet had work for it (no run needed)"
        else:
            result.note = "not due in the measured period (cron, wall clock)"
        results.append(result)
    return results


def outcomes_by_run(stack: harness.Stack, run_ids: list[str]) -> dict[str, list[tuple[str, str, float]]]:
    """run id → (cabinet, outcome, finished at, epoch s) of a sweep's cabinets (sweep_outcomes)."""
    out: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
    if not run_ids:
        return out
    with stack.env.connect() as conn:
        rows = conn.execute(
            f"SELECT run_id, cabinet_id, outcome, extract(epoch FROM finished_at)::float "
            f"FROM optima_{stack.env.env}.sweep_outcomes WHERE run_id = ANY(%s)",
            (run_ids,),
        ).fetchall()
    for run_id, cabinet, outcome, finished in rows:
        out[run_id].append((cabinet, outcome, finished))
    return out


def judge_sensors(stack: harness.Stack, start: float, end: float) -> list[tuple[str, int, float, float, bool]]:
    """(sensor, ticks, max gap s, allowed gap s, held) over [start, end]."""
    data = stack.dev.graphql(SENSOR_TICKS, {"sel": harness.LOCATION})["repositoryOrError"]
    out = []
    for sensor in data.get("sensors", []):
        state = sensor["sensorState"]
        if state["status"] != "RUNNING":
            continue
        interval = sensor["minIntervalSeconds"] or 30
        allowed = max(2 * interval, interval + 30)
        stamps = sorted(t["timestamp"] for t in state["ticks"] if start <= t["timestamp"] <= end)
        points = [start, *stamps, end]
        gap = max(b - a for a, b in itertools.pairwise(points))
        out.append((sensor["name"], len(stamps), gap, allowed, gap <= allowed))
    return out


def finished_runs(records: list[Any], start: float, end: float) -> tuple[int, int, dict[str, list[float]]]:
    """Runs that ended in [start, end]: all of them, those that ran (not cancelled while queued, as
    the account-busy sensor cancels a run queued past its window), and how long those ran, by job."""
    ended = [r for r in records if r.end_time and start <= r.end_time <= end]
    durations: dict[str, list[float]] = defaultdict(list)
    for r in ended:
        if r.start_time and r.end_time:
            durations[r.dagster_run.job_name].append(r.end_time - r.start_time)
    return len(ended), sum(len(v) for v in durations.values()), durations


def landed_bytes(folder: Path) -> int:
    """Bytes of the files under the landing's ``folder`` (0 while it does not exist); a file replaced
    while this walks is skipped."""
    total = 0
    for path in folder.rglob("*") if folder.is_dir() else ():
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            continue
    return total


@dataclass
class Outcome:
    n: int
    held: float  # share of cadence windows held (0..1), sensors included
    all_held: bool
    late_p95: float
    cores: dict[str, float]
    machine_cores: float
    peak_rss_mb: float
    runs_per_s: float  # runs that ended, those cancelled in the queue included
    ran_per_s: float  # runs that ran: the throughput
    created_per_s: float  # runs the sensors and schedules asked for: the demand
    peak_queued: int
    simulator_cores: float  # this process: the WB simulator's threads (and the sampler)
    deployment_cpu_s: float  # the deployment's process tree, run workers that ended included
    server_cpu_s: float  # the PostgreSQL server, every database of it
    watched_s: float
    lines: list[str]


def measure(bench: Bench, n: int, opts: Any) -> Outcome:
    from wb_simulator import CabinetSpec

    cabinets = [f"s{i:03d}" for i in range(1, n + 1)]
    specs = [CabinetSpec(id=c, products=10, orders_per_day=40, history_days=20) for c in cabinets]
    extra = {
        "OPTIMA_CADENCE_SCALE": f"{opts.cadence_scale:g}",
        "SYNC_QUEUE_CONCURRENCY": str(opts.sync_concurrency),
        "OPTIMA_MAX_CONCURRENT_RUNS": str(opts.max_runs),
    }
    if opts.landing not in ("on", "off"):
        raise ValueError(f"--landing must be on or off, got {opts.landing!r}")
    if opts.landing == "off":
        extra["OPTIMA_LANDING_URL"] = "off"
    if opts.freshness not in ("on", "off"):
        raise ValueError(f"--freshness must be on or off, got {opts.freshness!r}")
    with (
        bench.environment(f"scale{n}", **extra) as env,
        harness.deployment(env, cabinets=specs, time_scale=opts.time_scale) as stack,
    ):
        if opts.freshness == "off":
            stack.stop_sensor("feed_freshness_sensor")
        harness.say(f"  N={n}: deployment up; warm-up {opts.warmup} s, then watching {opts.wall} s")
        time.sleep(opts.warmup)  # a fixed wall time is what is measured here, not a condition
        if opts.align:
            # A second before the boundary: a window is judged when it lies whole inside the watch.
            wait = max(0.0, -time.time() % opts.align - 1)
            harness.say(f"  N={n}: watching from just before the next {opts.align}-s boundary, in {wait:.0f} s")
            time.sleep(wait)
        sampler = Sampler(stack.dev.proc.pid, env)
        landing = Path(env.variables["OPTIMA_STATE_DIR"]) / "landing"
        landed_before = landed_bytes(landing)
        start = time.time()
        here = psutil.Process()
        here_before = sum(here.cpu_times()[:2])
        sampler.start()
        imports = Imports(stack, cabinets, every=300)
        imports.start()
        time.sleep(opts.wall)
        sampler.stop()
        imports.stop()
        end = time.time()
        landed = landed_bytes(landing) - landed_before
        # The WB simulator serves from threads of this process (the sampler's own cost is small).
        simulator_cores = (sum(here.cpu_times()[:2]) - here_before) / (end - start)
        cadence_results = judge_cadences(stack, cabinets, start, end)
        sensors = judge_sensors(stack, start, end)
        from dagster import RunsFilter

        records = stack.instance.get_run_records(RunsFilter())  # every run of the deployment, read once
        done, ran, durations = finished_runs(records, start, end)
        ages = queue_ages(records, start, end)
        by_job = run_cpu_by_job(stack, records, sampler.run_process_cpu)

    lines = []
    expected = held = 0
    for c in cadence_results:
        share = "—" if c.share is None else f"{100 * c.share:.0f} %"
        lines.append(f"{c.name}: held {share} ({c.note}); skipped account-busy {c.skipped_busy}, late {c.late}")
        expected += c.expected
        held += c.held
    for name, ticks, gap, allowed, ok in sensors:
        lines.append(
            f"sensor {name}: {ticks} ticks, longest gap {gap:.0f} s (allowed {allowed:.0f} s): {'held' if ok else 'MISSED'}"
        )
        expected += 1
        held += ok
    cores = sampler.cores()
    lines.append(
        "CPU (cores busy): "
        + ", ".join(f"{k} {v:.2f}" for k, v in cores.items())
        + f"; the machine, every process: {sampler.machine_cores():.2f}; the WB simulator (this process) "
        f"{simulator_cores:.2f}"
    )
    per_hour = 3600 / (end - start) / n
    lines.append(
        f"CPU-seconds per cabinet-hour: deployment {sampler.deployment_total * per_hour:.2f} + this database's "
        f"PostgreSQL backends {sampler.postgres_cpu * per_hour:.2f} = "
        f"{(sampler.deployment_total + sampler.postgres_cpu) * per_hour:.2f}; with the whole PostgreSQL server "
        f"instead (every database of it: on a shared server, others' too) {sampler.server_total * per_hour:.2f}, "
        f"{(sampler.deployment_total + sampler.server_total) * per_hour:.2f} in all; the WB simulator apart "
        f"{simulator_cores * 3600 / n:.2f}; runs created per hour: {len(ages) / (end - start) * 3600:.0f}"
    )
    lines.append(
        f"bytes landed while watched (Parquet under {landing.name}/): {landed / 2**20:.1f} MB, "
        f"{landed * 86400 / (end - start) / n / 2**20:.2f} MB per cabinet-day at these cadences"
        if opts.landing == "on"
        else "bytes landed: none (the landing is off)"
    )
    lines.append(
        f"user imports (3 days) → rnp_daily while this ran: p50 {harness.quantile(imports.latencies, 0.5):.1f} s, "
        f"max {max(imports.latencies, default=0):.1f} s ({len(imports.latencies)} timed, {len(imports.failed)} not "
        "done in 600 s)"
        if imports.latencies
        else f"user imports: none timed ({len(imports.failed)} not done in 600 s)"
    )
    lines.append(
        f"finished runs {done} ({done / (end - start):.2f}/s), of which ran {ran} ({ran / (end - start):.2f}/s); created {len(ages)} ({len(ages) / (end - start):.2f}/s); "
        f"longest queue {sampler.peak_queued}"
    )
    lines.append(
        "run time (start → end) p50/p95 by job: "
        + ", ".join(
            f"{job} {harness.quantile(d, 0.5):.1f}/{harness.quantile(d, 0.95):.1f} s ({len(d)})"
            for job, d in sorted(durations.items(), key=lambda kv: -len(kv[1]))
        )
    )
    if env.variables.get("OPTIMA_RUN_LAUNCHER", os.environ.get("OPTIMA_RUN_LAUNCHER", "celery")) == "celery":
        lines.append("where the run workers' CPU went by job: not told apart (a warm run worker runs many jobs' runs)")
    else:
        lines.append(
            "where the run workers' CPU went (s, by job, from each run's process): "
            + ", ".join(f"{job} {cpu:.0f}" for job, cpu in sorted(by_job.items(), key=lambda kv: -kv[1]))
        )
    lines.append(
        "where this database's PostgreSQL CPU went (s, by application_name): "
        + ", ".join(f"{app} {cpu:.0f}" for app, cpu in sorted(sampler.postgres_by_app.items(), key=lambda kv: -kv[1]))
    )
    for line in lines:
        harness.say(f"    {line}")
    return Outcome(
        n=n,
        held=held / expected if expected else 1.0,
        all_held=held == expected and all(c.skipped_busy == 0 and c.late == 0 for c in cadence_results),
        late_p95=harness.quantile(ages, 0.95) if ages else 0.0,
        cores=cores,
        machine_cores=sampler.machine_cores(),
        peak_rss_mb=sampler.peak_rss / 2**20,
        runs_per_s=done / (end - start),
        ran_per_s=ran / (end - start),
        created_per_s=len(ages) / (end - start),
        peak_queued=sampler.peak_queued,
        simulator_cores=simulator_cores,
        deployment_cpu_s=sampler.deployment_total,
        server_cpu_s=sampler.server_total,
        watched_s=end - start,
        lines=lines,
    )


def run_cpu_by_job(stack: harness.Stack, records: list[Any], cpu_by_pid: dict[int, float]) -> dict[str, float]:
    """CPU seconds of the sampled run worker processes by the job of the run each executed (its
    RUN_START event's pid); a process no run names (a helper, a run started before the watch) is
    listed apart."""
    from dagster import DagsterEventType

    job_of: dict[int, str] = {}
    for r in records:
        if r.start_time is None:
            continue
        for entry in stack.instance.all_logs(r.dagster_run.run_id, of_type=DagsterEventType.RUN_START):
            if entry.dagster_event is not None and entry.dagster_event.pid:
                job_of[entry.dagster_event.pid] = r.dagster_run.job_name
    out: dict[str, float] = defaultdict(float)
    for pid, cpu in cpu_by_pid.items():
        out[job_of.get(pid, "(no run: helpers)")] += cpu
    return out


def queue_ages(records: list[Any], start: float, end: float) -> list[float]:
    """Seconds each run created in [start, end] waited in the queue (still queued: until ``end``)."""
    ages = []
    for r in records:
        created = r.create_timestamp.timestamp()
        if start <= created <= end:
            ages.append((r.start_time or end) - created)
    return ages


def cpu_per_cabinet_hour(o: Outcome) -> float:
    return (o.deployment_cpu_s + o.server_cpu_s) * 3600 / o.watched_s / o.n


def limit_of(outcome: Outcome, cores: int) -> str:
    busy = outcome.machine_cores
    top = max(outcome.cores.items(), key=lambda kv: kv[1])
    if busy >= 0.8 * cores:
        return f"CPU: {busy:.1f} of {cores} cores of the machine busy, most in {top[0]} ({top[1]:.2f})"
    return f"the run queue (longest {outcome.peak_queued} queued) with {busy:.1f} of {cores} cores of the machine busy"


def run(bench: Bench, opts: Any) -> None:
    import os

    outcomes = [measure(bench, n, opts) for n in sorted(opts.cabinets)]
    base = outcomes[0]
    smallest = f"N={base.n}, same run"
    scale = (
        f"cadences {opts.cadence_scale:g}x, WB time scale {opts.time_scale:g}, "
        f"SYNC_QUEUE_CONCURRENCY {opts.sync_concurrency}, OPTIMA_MAX_CONCURRENT_RUNS {opts.max_runs}, "
        f"landing {opts.landing}, freshness sensor {opts.freshness}"
    )
    for o in outcomes:
        note = f"{scale}; {'every cadence held' if o.all_held else limit_of(o, os.cpu_count() or 1)}"
        bench.figure(f"N={o.n}: cadence windows held", 100 * o.held, "%", baseline_name=smallest,
                     baseline=100 * base.held, higher_is_better=True, note=note)  # fmt: skip
        bench.figure(f"N={o.n}: queue wait p95", o.late_p95, "s", baseline_name=smallest, baseline=base.late_p95,
                     higher_is_better=False)  # fmt: skip
        bench.figure(f"N={o.n}: deployment CPU (its processes, PostgreSQL backends as sampled)", sum(o.cores.values()), "cores",
                     baseline_name=smallest, baseline=sum(base.cores.values()), higher_is_better=False)  # fmt: skip
        own = (o.deployment_cpu_s + o.cores["postgres (this database)"] * o.watched_s) * 3600 / o.watched_s / o.n
        own_base = (
            (base.deployment_cpu_s + base.cores["postgres (this database)"] * base.watched_s)
            * 3600
            / base.watched_s
            / base.n
        )
        bench.figure(f"N={o.n}: CPU-seconds per cabinet-hour (deployment + this database's PostgreSQL backends)", own,
                     "CPU-s", baseline_name=smallest, baseline=own_base, higher_is_better=False)  # fmt: skip
        bench.figure(f"N={o.n}: CPU-seconds per cabinet-hour (deployment + PostgreSQL server)", cpu_per_cabinet_hour(o),
                     "CPU-s", baseline_name=smallest, baseline=cpu_per_cabinet_hour(base),
                     higher_is_better=False, note=f"the WB simulator apart: {o.simulator_cores * 3600 / o.n:.2f} CPU-s "
                     f"per cabinet-hour ({o.simulator_cores:.2f} cores)")  # fmt: skip
        bench.figure(f"N={o.n}: runs created per hour", o.created_per_s * 3600, "runs/h", baseline_name=smallest,
                     baseline=base.created_per_s * 3600, higher_is_better=False)  # fmt: skip
        bench.figure(f"N={o.n}: the machine's CPU, every process", o.machine_cores, "cores", baseline_name=smallest,
                     baseline=base.machine_cores, higher_is_better=False)  # fmt: skip
        bench.figure(f"N={o.n}: deployment memory, peak RSS", o.peak_rss_mb, "MB", baseline_name=smallest,
                     baseline=base.peak_rss_mb, higher_is_better=False)  # fmt: skip
        bench.figure(f"N={o.n}: runs that ran", o.ran_per_s, "runs/s", baseline_name=smallest,
                     baseline=base.ran_per_s, higher_is_better=True)  # fmt: skip
        bench.figure(f"N={o.n}: runs ended, cancelled in the queue included", o.runs_per_s, "runs/s",
                     baseline_name=smallest, baseline=base.runs_per_s, higher_is_better=True)  # fmt: skip
    holding = [o for o in outcomes if o.all_held]
    best = max(holding, key=lambda o: o.n) if holding else None
    last = outcomes[-1]
    first_failing = next((o for o in outcomes if not o.all_held), None)
    why = limit_of(first_failing, os.cpu_count() or 1) if first_failing else "every N measured held"
    bench.figure("largest N holding every cadence", best.n if best else 0, "cabinets",
                 baseline_name="largest N measured", baseline=last.n, higher_is_better=True,
                 note=f"{scale}; first failing N: {first_failing.n if first_failing else '—'} ({why})")  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
