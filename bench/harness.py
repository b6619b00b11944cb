"""The benchmarks' shared harness: scratch databases, environments, the real deployment, figures, output.

Every benchmark module in ``bench/`` declares

- a one-line ``TITLE`` (its name is its module's: :func:`name_of`);
- ``OPTIONS``: its sizes as :class:`Option` (a full value and a ``--quick`` value);
- ``run(bench: Bench, opts: argparse.Namespace) -> None``, which measures and calls
  :meth:`Bench.figure` for every figure, each next to a baseline measured in the same run;

and ends with ``if __name__ == "__main__": harness.main(sys.modules[__name__])`` so that it also
runs alone (``python bench/<name>.py [--quick] [--<option> VALUE]``). ``bench/run_all.py`` runs any
of them in one process and prints one table.

Databases: a throwaway database on ``OPTIMA_BENCH_DATABASE_URL``, else ``OPTIMA_TEST_DATABASE_URL``,
else the embedded PostgreSQL (started in a temporary folder), dropped at the end. Results go to
``bench/results/<time>-<names>.json`` (gitignored) with the machine's description.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
from cryptography.fernet import Fernet
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `bench.*` and the system-test harness (tests/system/harness.py)
    sys.path.insert(0, str(ROOT))

from optima_pipelines.db.connection import connect  # noqa: E402
from optima_pipelines.db.migrate import ensure_schemas, upgrade  # noqa: E402
from optima_pipelines.db.urls import dagster_storage_url, masked, with_database  # noqa: E402
from optima_pipelines.operations.runtime import project_file  # noqa: E402
from tests.system.harness import LOCATION  # noqa: E402  (the code location, as GraphQL selectors name it)

RESULTS_DIR = ROOT / "bench" / "results"


# --- options -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """A size or knob of one benchmark: ``full`` by default, ``quick`` with ``--quick``."""

    name: str  # e.g. "rows" → --rows alone, --ingest-rows under run_all
    full: Any
    quick: Any
    help: str
    #: "int", "float", "str", or "ints" (comma-separated list of integers)
    kind: str = "int"

    def parse(self, text: str) -> Any:
        if self.kind == "ints":
            return [int(x) for x in str(text).split(",") if x.strip()]
        return {"int": int, "float": float, "str": str}[self.kind](text)

    def describe(self) -> str:
        def show(v: Any) -> str:
            return ",".join(map(str, v)) if isinstance(v, list) else str(v)

        return f"{self.help} (default {show(self.full)}; --quick {show(self.quick)})"


def name_of(module: ModuleType) -> str:
    """A benchmark's name: its module's (``bench/<name>.py``), also when it runs as ``__main__``."""
    return Path(str(module.__file__)).stem


def add_options(parser: argparse.ArgumentParser, module: ModuleType, prefix: str = "") -> None:
    group = parser.add_argument_group(f"{name_of(module)}: {module.TITLE}")
    for option in module.OPTIONS:
        flag = f"--{prefix}{option.name}".replace("_", "-")
        group.add_argument(flag, dest=f"{prefix}{option.name}".replace("-", "_"), type=option.parse, default=None,
                           help=option.describe())  # fmt: skip


def resolve_options(args: argparse.Namespace, module: ModuleType, quick: bool, prefix: str = "") -> argparse.Namespace:
    values = {}
    for option in module.OPTIONS:
        given = getattr(args, f"{prefix}{option.name}".replace("-", "_"), None)
        values[option.name.replace("-", "_")] = given if given is not None else (option.quick if quick else option.full)
    return argparse.Namespace(quick=quick, **values)


# --- figures -------------------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured figure and the baseline it is compared with, measured in the same run."""

    bench: str
    name: str
    value: float
    unit: str
    baseline_name: str
    baseline: float | None
    #: True for throughputs (rows/s, runs/s), False for times, sizes and shares of misses.
    higher_is_better: bool
    load_average: float
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0) or self.value is None:
            return None
        return self.value / self.baseline  # type: ignore[operator]

    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None:
            return ""
        if 0.95 <= ratio <= 1.05:
            return "about the same"
        better = ratio > 1 if self.higher_is_better else ratio < 1
        if ratio == 0:  # a figure of 0 (no N held, nothing left): no factor to give
            return "better (0)" if better else "worse (0)"
        factor = ratio if ratio > 1 else 1 / ratio
        return f"{factor:.1f}× {'better' if better else 'worse'}"


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "%":
        return f"{value:.0f} %"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 100:
        return f"{value:.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; the median for q=0.5."""
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q * 100) - 1))]


def postgres_cpu() -> float:
    """CPU seconds of the PostgreSQL server: every postgres process, and the ended ones its postmaster reaped."""
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "postgres":
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


# --- the machine ---------------------------------------------------------------------------------


def machine(server_url: str | None = None) -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        from importlib.metadata import version

        info["dagster"] = version("dagster")
    except Exception:
        pass
    try:
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if server_url:
        with connect(server_url, autocommit=True) as conn:
            info["postgresql"] = str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]  # type: ignore[index]
        info["database_server"] = masked(server_url)
    return info


def describe_machine(info: dict[str, Any]) -> str:
    load = " ".join(f"{x:.2f}" for x in info["load_average_at_start"])
    return (
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM; PostgreSQL "
        f"{info.get('postgresql', '?')}; Python {info['python']}; dagster {info.get('dagster', '?')}; "
        f"load average at start {load}"
    )


# --- databases and environments -----------------------------------------------------------------


class Bench:
    """One benchmark session: the database server, scratch databases, collected figures."""

    def __init__(self, quick: bool = False) -> None:
        self.quick = quick
        self.figures: list[Figure] = []
        self.errors: list[dict[str, str]] = []
        self.current = ""
        self._stack = ExitStack()
        self._server: str | None = None
        self.work = Path(tempfile.mkdtemp(prefix="optima-bench-"))

    # -- lifecycle

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        shutil.rmtree(self.work, ignore_errors=True)

    @property
    def server_url(self) -> str:
        """OPTIMA_BENCH_DATABASE_URL, else OPTIMA_TEST_DATABASE_URL, else an embedded server."""
        if self._server is None:
            url = (
                os.environ.get("OPTIMA_BENCH_DATABASE_URL") or os.environ.get("OPTIMA_TEST_DATABASE_URL") or ""
            ).strip()
            if not url:
                from optima_pipelines.db.embedded import start_embedded

                url = start_embedded(self.work / "pgserver")
            self._server = url
        return self._server

    @contextmanager
    def database(self, prefix: str = "optima_bench") -> Iterator[str]:
        """A database of its own on the server, dropped afterwards (also when the benchmark fails)."""
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with connect(self.server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield with_database(self.server_url, name)
        finally:
            with connect(self.server_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    @contextmanager
    def environment(self, env: str = "bench", **extra: str) -> Iterator[Environment]:
        """A scratch database with a migrated warehouse and Dagster storage, and this process's
        environment pointed at it (restored afterwards): in-process Dagster calls see it too."""
        with self.database(f"optima_{env}") as url:
            home = Path(tempfile.mkdtemp(prefix=f"{env}-", dir=self.work))
            (home / "dagster_home").mkdir()
            shutil.copyfile(project_file("dagster.yaml"), home / "dagster_home" / "dagster.yaml")
            upgrade(url, f"optima_{env}")
            ensure_schemas(url, f"dagster_{env}")
            variables = {
                "OPTIMA_DATABASE_URL": url,
                "OPTIMA_ENV": env,
                "OPTIMA_STATE_DIR": str(home / "state"),
                "OPTIMA_SECRET_KEY": Fernet.generate_key().decode(),
                "OPTIMA_DAGSTER_STORAGE_URL": dagster_storage_url(url, f"dagster_{env}"),
                "DAGSTER_HOME": str(home / "dagster_home"),
                **extra,
            }
            saved = {k: os.environ.get(k) for k in variables}
            os.environ.update(variables)
            try:
                yield Environment(url, env, variables, home)
            finally:
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value

    # -- figures

    def figure(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        baseline_name: str,
        baseline: float | None,
        higher_is_better: bool,
        note: str = "",
        load: float | None = None,
    ) -> Figure:
        fig = Figure(
            self.current,
            name,
            value,
            unit,
            baseline_name,
            baseline,
            higher_is_better,
            load_average() if load is None else load,
            note,
        )
        self.figures.append(fig)
        say(
            f"  = {name}: {format_value(value, unit)}  vs  {baseline_name}: {format_value(baseline, unit)}  {fig.verdict()}"
        )
        return fig


@dataclass
class Environment:
    """A migrated OPTIMA_ENV on a scratch database (``variables`` are set in this process)."""

    database_url: str
    env: str
    variables: dict[str, str]
    home: Path

    @property
    def schema(self) -> str:
        return f"optima_{self.env}"

    def connect(self, autocommit: bool = True):  # type: ignore[no-untyped-def]
        return connect(self.database_url, self.schema, autocommit=autocommit)

    def instance(self):  # type: ignore[no-untyped-def]
        from dagster import DagsterInstance

        return DagsterInstance.get()


# --- processes -------------------------------------------------------------------------------------


@dataclass
class Usage:
    """CPU and memory of a process tree, sampled while something runs."""

    samples: list[tuple[float, float, float]] = field(default_factory=list)  # (t, cpu seconds, rss bytes)

    @property
    def cpu_cores(self) -> float:
        """Mean cores busy over the sampled period (1.0 = one core fully)."""
        if len(self.samples) < 2:
            return 0.0
        (t0, c0, _), (t1, c1, _) = self.samples[0], self.samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0

    @property
    def peak_rss_mb(self) -> float:
        return max((s[2] for s in self.samples), default=0.0) / 2**20


class TreeSampler:
    """Samples CPU time and RSS of a process and all its descendants (run workers come and go:
    the CPU of finished children is carried forward so the total only grows)."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.usage = Usage()
        self._seen: dict[int, float] = {}
        self._finished = 0.0

    def sample(self) -> None:
        procs = [self.root]
        try:
            procs += self.root.children(recursive=True)
        except psutil.Error:
            pass
        alive: dict[int, float] = {}
        rss = 0
        for proc in procs:
            try:
                times = proc.cpu_times()
                alive[proc.pid] = times.user + times.system + times.children_user + times.children_system
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        for pid, cpu in self._seen.items():
            if pid not in alive:
                self._finished += cpu
        self._seen = alive
        self.usage.samples.append((time.monotonic(), self._finished + sum(alive.values()), float(rss)))


# --- output --------------------------------------------------------------------------------------


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def table(figures: Sequence[Figure]) -> str:
    rows = [("benchmark", "figure", "ours", "baseline (same run)", "ours/baseline", "load")]
    for f in figures:
        ratio = f.ratio
        rows.append(
            (
                f.bench,
                f.name + (f" [{f.note}]" if f.note else ""),
                format_value(f.value, f.unit),
                f"{f.baseline_name}: {format_value(f.baseline, f.unit)}",
                f"{ratio:.2f} ({f.verdict()})" if ratio is not None else "",
                f"{f.load_average:.1f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append(
            "  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_results(names: Sequence[str], info: dict[str, Any], bench: Bench, options: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS_DIR / f"{stamp}-{'-'.join(names) if len(names) < 4 else 'all'}.json"
    body = {
        "finished_at": datetime.now(UTC).isoformat(),
        "machine": info,
        "quick": bench.quick,
        "options": options,
        "figures": [{**asdict(f), "ratio": f.ratio, "verdict": f.verdict()} for f in bench.figures],
        "errors": bench.errors,
    }
    path.write_text(json.dumps(body, indent=2, default=str, ensure_ascii=False))
    return path


@contextmanager
def terminated_unwinds() -> Iterator[None]:
    """SIGTERM (``kill``, ``pkill -f bench/...``) ends the benchmark as Ctrl-C does: SystemExit(143)
    unwinds every ``with``, so the deployment, simulator and scratch database it started are stopped
    and dropped instead of outliving it (re-parented to init)."""

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_modules(modules: Sequence[ModuleType], args: argparse.Namespace, *, prefixed: bool) -> int:
    """Run the benchmarks in order, print one table, write the JSON; 1 if any benchmark failed."""
    with terminated_unwinds(), Bench(quick=args.quick) as bench:
        info = machine(bench.server_url)
        say(describe_machine(info))
        options: dict[str, Any] = {}
        for module in modules:
            name = name_of(module)
            opts = resolve_options(args, module, args.quick, f"{name}-" if prefixed else "")
            options[name] = vars(opts)
            bench.current = name
            say(f"\n== {name}: {module.TITLE} (load average {load_average():.2f})")
            started = time.monotonic()
            try:
                module.run(bench, opts)
            except Exception as exc:  # one broken benchmark must not hide the others' figures
                traceback.print_exc()
                bench.errors.append({"bench": name, "error": f"{exc.__class__.__name__}: {exc}"})
            say(f"   ({name} took {time.monotonic() - started:.0f} s)")
        print()
        print(describe_machine(info))
        print(
            "Each figure is next to its baseline measured in the same run; 'load' is the 1-minute load "
            "average when the figure was taken (the machine may be shared).\n"
        )
        print(table(bench.figures))
        for error in bench.errors:
            print(f"\nFAILED {error['bench']}: {error['error']}")
        path = write_results([name_of(m) for m in modules], info, bench, options)
        print(f"\nresults: {path.relative_to(ROOT)}")
        return 1 if bench.errors else 0


def main(module: ModuleType, argv: list[str] | None = None) -> None:
    """``python bench/<name>.py``: one benchmark alone."""
    parser = argparse.ArgumentParser(
        description=(module.__doc__ or module.TITLE), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    add_options(parser, module)
    args = parser.parse_args(argv)
    sys.exit(run_modules([module], args, prefixed=False))


def wait_for(condition: Callable[[], Any], what: str, timeout: float, poll: float = 0.5) -> Any:
    """Poll until ``condition()`` is truthy; raise naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def best_of(repeat: int, fn: Callable[[], Any], before: Callable[[], Any] | None = None) -> tuple[float, Any]:
    """The fastest of ``repeat`` timed calls (``before`` runs untimed before each)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


# --- the real deployment -------------------------------------------------------------------------

LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


@dataclass
class Stack:
    """The real deployment (`optima-pipelines dev`: code server, daemon, webserver, metrics) on an
    environment, and the simulated WB it talks to (None without cabinets)."""

    env: Environment
    dev: Any  # tests.system.harness.RunningDeployment
    sim: Any = None
    instance: Any = None

    def launch(self, job: str, run_config: dict | None = None, tags: dict[str, str] | None = None) -> str:
        params: dict[str, Any] = {"selector": {**LOCATION, "jobName": job}}
        if run_config:
            params["runConfigData"] = run_config
        if tags:
            params["executionMetadata"] = {"tags": [{"key": k, "value": v} for k, v in tags.items()]}
        result = self.dev.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launching {job} failed: {result}")
        return result["run"]["runId"]

    def stop_sensor(self, name: str) -> None:
        """Stop a sensor of the code location through GraphQL, as an operator does in the UI."""
        from tests.system.harness import STOP_SENSOR, automation_id

        result = self.dev.graphql(STOP_SENSOR, {"id": automation_id(self.dev, "sensor", name)})["stopSensor"]
        if result["__typename"] == "PythonError":
            raise RuntimeError(f"stopping {name} failed: {result['message']}")


@contextmanager
def deployment(
    env: Environment,
    *,
    cabinets: Sequence[Any] = (),
    time_scale: float = 60,
    module: str | None = None,
    ready_timeout: float = 300,
) -> Iterator[Stack]:
    """Start the real deployment on ``env``; with ``cabinets`` (wb_simulator.CabinetSpec), a WB
    simulator on localhost with those cabinets registered (tokens encrypted as in production)."""
    from tests.system.harness import running_dev

    with ExitStack() as stack:
        sim = None
        extra: dict[str, str] = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        if cabinets:
            from optima_pipelines.warehouse.cabinets import add_cabinet
            from optima_pipelines.warehouse.secrets import TokenCipher
            from wb_simulator import Simulator, serve

            # The simulated clock follows real time: the daemon's runs happen in real time.
            sim = Simulator(seed=21, cabinets=list(cabinets), time_scale=time_scale)
            cipher = TokenCipher(env.variables["OPTIMA_SECRET_KEY"].encode())
            with env.connect() as conn:
                for spec in cabinets:
                    add_cabinet(conn, cipher, spec.id, spec.id.upper(), sim.token(spec.id))
            base_url = stack.enter_context(serve(sim))
            extra.update(OPTIMA_WB_BASE_URL=base_url, OPTIMA_WB_TIME_SCALE=str(time_scale))
        os.environ.update(extra)  # the deployment and this process's own Dagster calls alike
        dev = stack.enter_context(
            running_dev(
                env.variables | extra, env.home, ready_timeout=ready_timeout, args=("-m", module) if module else ()
            )
        )
        instance = stack.enter_context(env.instance())
        yield Stack(env, dev, sim, instance)


# --- cabinets and feed events without a simulator ---------------------------------------------


def add_offline_cabinets(env: Environment, instance: Any, count: int) -> list[str]:
    """``count`` active cabinets c0001… with well-formed tokens no WB accepts (nothing syncs them),
    in the cabinets table and in Dagster's dynamic partition dimension; their ids."""
    from optima_pipelines.partitions import CABINETS_NAME
    from optima_pipelines.warehouse.cabinets import add_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher

    ids = [f"c{i:04d}" for i in range(1, count + 1)]
    cipher = TokenCipher(env.variables["OPTIMA_SECRET_KEY"].encode())
    with env.connect() as conn:
        for cabinet in ids:
            add_cabinet(conn, cipher, cabinet, cabinet.upper(), f"bench-token-{cabinet}-{cabinet}")
    instance.add_dynamic_partitions(CABINETS_NAME, ids)
    return ids


def report_increment(env: Environment, instance: Any, cabinets: Sequence[str], feeds: Sequence[str]) -> None:
    """One increment of each cabinet's today and yesterday of each feed, as the re-aggregation
    planner and the UI see it: the watermarks the feeds' triggers bump (their РНП pairs due) and the
    feed materializations the runs report."""
    from dagster import AssetKey, AssetMaterialization

    from optima_pipelines.mart.plan import FEED_ROLLUP, MART
    from optima_pipelines.partitions import cabinet_day_key
    from optima_pipelines.timeutil import today_moscow

    today = today_moscow()
    days = (today - timedelta(days=1), today)
    tables = sorted({MART, *(t for f in feeds if (t := FEED_ROLLUP[f]))})
    with env.connect() as conn:
        conn.execute(
            """INSERT INTO rnp_watermarks AS w (cabinet_id, table_name, day, changes)
               SELECT c, t, d, 1 FROM unnest(%s::text[]) c, unnest(%s::text[]) t, unnest(%s::date[]) d
               ON CONFLICT (cabinet_id, table_name, day) DO UPDATE SET changes = w.changes + 1""",
            (list(cabinets), tables, list(days)),
        )
    for cabinet in cabinets:
        for feed in feeds:
            for day in days:
                instance.report_runless_asset_event(
                    AssetMaterialization(
                        asset_key=AssetKey(feed),
                        partition=cabinet_day_key(cabinet, day),
                        metadata={"trigger": "scheduled", "rows_inserted": 10, "rows_updated": 2},
                    )
                )


# --- history shaped like Dagster's own rows ------------------------------------------------------


def fill_runs(conn: Any, dagster_schema: str, runs: int, cabinets: int, *, in_flight: bool = True) -> None:
    """``runs`` runs over the last days in Dagster's run storage, with our tags, by bulk SQL: ~93 %
    success, 5 % failure, 1 % canceled; with ``in_flight``, 300 queued and 6 running. Their
    ``run_body`` is empty, so only SQL that reads the tables may see them (as /metrics does):
    without ``in_flight`` Dagster's own API never loads one (it asks for queued or running runs)."""
    from optima_pipelines.orchestration.queues import QUEUES

    runs_table, tags = sql.Identifier(dagster_schema, "runs"), sql.Identifier(dagster_schema, "run_tags")
    active = "WHEN i <= 300 THEN 'QUEUED' WHEN i <= 306 THEN 'STARTED'" if in_flight else ""
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {runs} (run_id, pipeline_name, status, run_body, create_timestamp, update_timestamp,
                                start_time, end_time)
            SELECT md5('run' || i)::uuid::text, '__ASSET_JOB',
                   CASE {active} WHEN i %% 100 < 5 THEN 'FAILURE' WHEN i %% 100 = 5 THEN 'CANCELED' ELSE 'SUCCESS' END,
                   '{{}}', t, t + interval '5 seconds',
                   extract(epoch FROM t), extract(epoch FROM t) + 2 + (i %% 30)
            FROM (SELECT i, localtimestamp - (i * interval '6 seconds') AS t FROM generate_series(1, %s) AS i) AS s
            """
        ).format(runs=runs_table, active=sql.SQL(active)),
        (runs,),
    )
    queues = list(QUEUES)
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {tags} (run_id, key, value)
            SELECT md5('run' || i)::uuid::text, k, v
            FROM generate_series(1, %(n)s) AS i,
            LATERAL (VALUES
                ('optima/queue', (%(queues)s::text[])[1 + i %% %(nq)s]),
                ('optima/cabinet', 'cab-' || (1 + i %% %(nc)s)),
                ('dagster/partition/cabinet', 'cab-' || (1 + i %% %(nc)s)),
                ('dagster/partition/date', to_char(current_date - (i %% 30), 'YYYY-MM-DD')),
                ('optima/trigger', 'schedule'),
                ('dagster/priority', '0')
            ) AS t(k, v)
            UNION ALL
            SELECT md5('run' || i)::uuid::text, 'optima/skipped', 'account-busy'
            FROM generate_series(1, %(n)s) AS i WHERE i %% 50 = 7
            """
        ).format(tags=tags),
        {"n": runs, "queues": queues, "nq": len(queues), "nc": cabinets},
    )
    conn.execute(sql.SQL("ANALYZE {}").format(runs_table))
    conn.execute(sql.SQL("ANALYZE {}").format(tags))
