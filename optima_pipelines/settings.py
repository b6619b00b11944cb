"""Deployment settings, read from the environment in one place.

Every environment variable the deployment reads is declared here, with its default and meaning
(ENVIRONMENT_VARIABLES: the one source of docs/configuration.md and of the defaults below).
Nothing here connects to anything; `optima_pipelines.db` turns these settings into connections.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Literal

from optima_pipelines.errors import ConfigError
from optima_pipelines.timeutil import today_moscow

ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,29}$")


@dataclass(frozen=True)
class EnvironmentVariable:
    """One environment variable: its default and what it means. docs/configuration.md is generated
    from these (``python -m optima_pipelines.settings --markdown``), and the code reads its defaults here."""

    #: The value used when the variable is unset, as one would write it; None: unset means ``unset``.
    default: str | None
    meaning: str
    #: With ``default`` None: what leaving the variable unset does.
    unset: str = ""
    #: Who reads it: the deployment, only the test suite, only the benchmarks, or our own processes.
    scope: Literal["deployment", "tests", "benchmarks", "internal"] = "deployment"

    @property
    def default_text(self) -> str:
        return f"`{self.default}`" if self.default is not None else f"unset: {self.unset}"


#: Every environment variable the deployment, its tests and its benchmarks read: the one source of the
#: settings, their defaults and their meaning (tests/unit/test_configuration_doc.py holds the docs to it).
ENVIRONMENT_VARIABLES: dict[str, EnvironmentVariable] = {
    "OPTIMA_DATABASE_URL": EnvironmentVariable(
        None,
        "PostgreSQL server for the warehouse and Dagster's storage, `postgresql://user:password@host:port/db`.",
        unset="a private embedded PostgreSQL started from a wheel, its data in the state folder",
    ),
    "OPTIMA_ENV": EnvironmentVariable(
        "dev",
        "Environment name (dev, stage, prod, ...: lowercase letters, digits and underscores, starting with a "
        "letter, at most 30): the warehouse schema `optima_<env>` and Dagster's storage schema `dagster_<env>` on "
        "the same server (the original's QUEUE_PREFIX).",
    ),
    "OPTIMA_STATE_DIR": EnvironmentVariable(
        ".optima",
        "Folder for local state, relative to the working directory: the embedded PostgreSQL's data, `DAGSTER_HOME` "
        "(`dagster/<env>/`), the generated token key.",
    ),
    "OPTIMA_UPLOAD_DIR": EnvironmentVariable(
        None,
        "Folder the realization reports users upload are read from (`import-user-report` requests name a file in "
        "it); no other path is ever opened for a request.",
        unset="`uploads` in the state folder",
    ),
    "OPTIMA_SECRET_KEY": EnvironmentVariable(
        None,
        "Fernet key that encrypts WB tokens at rest; several keys, newest first, comma- or newline-separated, "
        "during a rotation (docs/deploy.md).",
        unset="`secret.key` in the state folder, generated once (mode 0600)",
    ),
    "OPTIMA_DAGSTER_STORAGE_URL": EnvironmentVariable(
        None,
        "Dagster's storage URL (`postgresql+psycopg2://…?options=-csearch_path=dagster_<env>`), which `dagster.yaml` "
        "reads; set it only to put Dagster's storage elsewhere.",
        unset="derived from `OPTIMA_DATABASE_URL` and `OPTIMA_ENV` by the CLI, and by Dagster's own commands "
        "(`dagster dev`, `dg ...`) through the storage",
    ),
    "OPTIMA_WB_BASE_URL": EnvironmentVariable(
        None,
        "One base URL for every WB category, path-prefixed by category (the simulator's address).",
        unset="WB's real hosts",
    ),
    "OPTIMA_WB_TIME_SCALE": EnvironmentVariable(
        "1",
        "Only with the WB simulator running a faster clock: divides WB's rate-limit periods and pauses by this "
        "factor (1: WB's real limits).",
    ),
    "SYNC_QUEUE_CONCURRENCY": EnvironmentVariable(
        "5",
        "Scheduled runs of the six sync queues at once, in total (sweeps and resumes). Replaces the "
        "`optima/queue-class: sync` limit of `dagster.yaml`, which holds this default.",
    ),
    "OPTIMA_MAX_CONCURRENT_RUNS": EnvironmentVariable(
        "8",
        "Runs at once, every queue together. Replaces `max_concurrent_runs` of `dagster.yaml`, which holds this "
        "default, sized for 2 cores. The user lane keeps 2 of them, scheduled work gets the rest; keep it above "
        "`SYNC_QUEUE_CONCURRENCY`, and give the warm run workers together as many processes.",
    ),
    "DIGITIZATION_INCREMENT_INTERVAL_MS": EnvironmentVariable(
        "1800000", "Interval of the orders/sales increment, in milliseconds (30 min; at least 1000)."
    ),
    "OPTIMA_CADENCE_SCALE": EnvironmentVariable(
        "1",
        "For load drills and benchmarks (`bench/scale.py`): the per-cabinet interval cadences (the increment, ads, "
        "funnel, prices, auto-replies) run this many times more often and their cadence windows are as much "
        "shorter, so an hour of production load fits in minutes; crons keep their times. A scale that would run "
        "a cadence more often than every 20 s is an error naming it.",
    ),
    "OPTIMA_SWEEP_SHARD_SIZE": EnvironmentVariable(
        "250",
        "Cabinets per sweep run: each scheduled cadence window is one run over every due cabinet, split into runs "
        "of at most this many.",
    ),
    "OPTIMA_SWEEP_THREADS": EnvironmentVariable(
        "8",
        "Cabinets a sweep run syncs at once (WB calls are I/O; each cabinet keeps its own WB limits). A run keeps "
        "at most this + 2 warehouse sessions.",
    ),
    "OPTIMA_SWEEP_BUSY_WAIT_SECONDS": EnvironmentVariable(
        "30",
        "How long a sweep keeps coming back to a cabinet whose lock another run holds before it records the "
        "cabinet as account-busy for the window.",
    ),
    "OPTIMA_REAGGREGATE_EVERY_SECONDS": EnvironmentVariable(
        "60",
        "At most how often the re-aggregation sensor plans РНП recomputes of the scheduled syncs' changes: what "
        "came meanwhile waits and goes in the same few runs (a window's sweeps write their cabinets over a minute "
        "or more); a user's feed import recomputes its own days in its run. 0: every tick.",
    ),
    "DAGSTER_EVENT_BATCH_SIZE": EnvironmentVariable(
        "1000",
        "Dagster's own setting: how many materializations of one step are stored in one statement. The "
        "definitions set it where it is unset (Dagster's own default, 0, stores each event alone). Our "
        "storage stores a run's asset check evaluations in batches of the same size (0 or 1: one by one).",
    ),
    "OPTIMA_CABINET_LOCK_WAIT_SECONDS": EnvironmentVariable(
        "120",
        "How long a single-cabinet run (a request, a partition, a resume) waits for the cabinet's lock held by "
        "another run before it fails as busy and is retried.",
    ),
    "OPTIMA_PARTITIONS_START": EnvironmentVariable(
        "2025-01-01",
        "First Moscow day of the cabinet × day partitions (a real date, not after today).",
    ),
    "OPTIMA_UI_USER": EnvironmentVariable(
        None,
        "User name of the Dagster UI's HTTP basic auth: with `OPTIMA_UI_PASSWORD`, every route needs a login, "
        "GraphQL and websockets included; one of the two without the other is an error.",
        unset="no auth (the webserver says so on its first line)",
    ),
    "OPTIMA_UI_PASSWORD": EnvironmentVariable(
        None, "Password of the Dagster UI's HTTP basic auth (with `OPTIMA_UI_USER`).", unset="no auth"
    ),
    "OPTIMA_RUN_RETENTION_DAYS": EnvironmentVariable(
        "7",
        "The nightly `prune_runs` maintenance job deletes successful runs older than this many days; failed runs "
        "are kept.",
    ),
    "OPTIMA_PARTITION_RETENTION_MONTHS": EnvironmentVariable(
        "24",
        "Months of `rnp_daily` and its rollups kept before the current month: the weekly partition-manager drops "
        "older table partitions (at least 3: the nightly merge heals the last 90 days).",
    ),
    "OPTIMA_LOG_FORMAT": EnvironmentVariable(
        "text",
        "How every process prints its log lines: `text` (one line with `run_id=` and `cabinet=`) or `json` (one JSON "
        "object a line: time, level, logger, message, run_id, job, queue, cabinet, exc). Tokens are masked in both.",
    ),
    "OPTIMA_AUTOMATIONS_STOPPED": EnvironmentVariable(
        None,
        "Sensors and schedules that start stopped in this deployment: comma-separated names or shell patterns, "
        "e.g. `autobidder_*,booking_slot_monitor,repricer_sensor,autoreply_sync_sensor` on a staging copy so its "
        "engines never act on WB. An operator can still start them in the UI. A pattern that names nothing stops "
        "the code location from loading with an error that lists the names.",
        unset="none: every automation starts as its code declares",
    ),
    "OPTIMA_RUN_LAUNCHER": EnvironmentVariable(
        "celery",
        "How a run's worker starts. `celery`: warm run workers (`optima-pipelines serve run-worker`, started by "
        "`dev`; any number, on any host) take runs from a broker. `spawn`: Dagster's own DefaultRunLauncher (the "
        "code server spawns a fresh process per run, which imports Dagster and the definitions; no run worker "
        "needed). The warm workers start a trivial run under the import-dagster floor and run 8× the spawn "
        "launcher's burst (docs/performance.md; docs/deploy.md). The default is `celery` for what "
        "`optima-pipelines dev` and `serve` start, `spawn` for Dagster's own commands (`dagster dev`, `dg dev`, "
        "`dagster-daemon run`, `optima-pipelines dagster ...`), which start no run worker.",
    ),
    "OPTIMA_RUN_WORKER_BROKER_URL": EnvironmentVariable(
        None,
        "With `OPTIMA_RUN_LAUNCHER=celery`: the Celery broker between the daemon and the run workers, "
        "`redis://host:6379/0` in production (runs and their task states in Redis).",
        unset="kombu's SQLAlchemy transport on Dagster's own PostgreSQL schema (no new server)",
    ),
    "OPTIMA_RUN_WORKER_BACKEND_URL": EnvironmentVariable(
        None,
        "Celery's result backend, only with a broker that is neither Redis (its own backend) nor SQLAlchemy "
        "(Dagster's schema).",
        unset="`rpc://`",
    ),
    "OPTIMA_CODE_SERVER_FORKSERVER": EnvironmentVariable(
        None,
        "`1`: with `OPTIMA_RUN_LAUNCHER=spawn`, the code server forks the run workers from a forkserver that "
        "imported Dagster and the definitions once (issue 17's other way, kept for `bench/orchestration.py`'s "
        "comparison; `celery` is faster).",
        unset="off (spawn, Dagster's own)",
    ),
    "OPTIMA_RUN_WORKER_PRELOAD": EnvironmentVariable(
        None,
        "Set by `serve run-worker` for its worker processes: the definitions module they import at start. Not "
        "for operators.",
        unset="only Dagster's run-execution modules are preloaded",
        scope="internal",
    ),
    "OPTIMA_LANDING_URL": EnvironmentVariable(
        None,
        "Where every WB answer the syncs decode is kept as it came, in Parquet (docs/landing.md): a local folder or "
        "a pyarrow filesystem URL (`s3://bucket/prefix?endpoint_override=https://host`, with the `AWS_*` credentials "
        "in the environment); `off`: no landing.",
        unset="the `landing` folder in the state folder",
    ),
    "OPTIMA_LANDING_RETENTION_DAYS": EnvironmentVariable(
        "120",
        "Moscow days of landed WB answers kept: the weekly partition manager deletes older day folders (WB's "
        "statistics keep 90 days; a replay after a parser fix needs what it said then).",
    ),
    "OPTIMA_TEST_DATABASE_URL": EnvironmentVariable(
        None,
        "The PostgreSQL server on which the suite creates (and drops) its own database. Its `max_connections` "
        "less the superuser's reserve must hold 80 sessions per pytest worker (a system-test file runs up to two "
        "whole deployments): 324 for the four workers of pytest.ini (the suite says so before it starts otherwise).",
        unset="the embedded server, one per pytest worker",
        scope="tests",
    ),
    "OPTIMA_TEST_UPDATE_DOCS": EnvironmentVariable(
        None,
        "`1`: the freshness drill (`tests/system/test_drills_freshness.py`) writes its screenshot of the stale "
        "cabinet in the UI to `docs/img/`.",
        unset="the drill takes the screenshot into its artifacts folder and leaves `docs/img/` as it is",
        scope="tests",
    ),
    "OPTIMA_BENCH_DATABASE_URL": EnvironmentVariable(
        None,
        "The PostgreSQL server on which the benchmarks (`bench/`) create (and drop) throwaway databases.",
        unset="`OPTIMA_TEST_DATABASE_URL`, else the embedded server",
        scope="benchmarks",
    ),
    "OPTIMA_BENCH_REDIS_URL": EnvironmentVariable(
        "redis://127.0.0.1:6379/15",
        "The Redis of `bench/orchestration.py --launchers celery-redis` (warm run workers on a Redis broker).",
        scope="benchmarks",
    ),
}


def default(name: str) -> str:
    """The documented default of environment variable ``name`` (which must have one)."""
    value = ENVIRONMENT_VARIABLES[name].default
    if value is None:
        raise KeyError(f"{name} has no default value")
    return value


_SCOPES = {
    "deployment": "The deployment",
    "internal": "Set by our own processes",
    "tests": "Tests",
    "benchmarks": "Benchmarks",
}


def configuration_markdown() -> str:
    """docs/configuration.md: every environment variable, its default and meaning, by who reads it."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from optima_pipelines/settings.py ENVIRONMENT_VARIABLES by",
        "     `python -m optima_pipelines.settings --markdown > docs/configuration.md`; edit those, not this file",
        "     (tests/unit/test_configuration_doc.py fails when it is out of date). -->",
        "",
        "Every setting is an environment variable, declared with its default and meaning in",
        "`optima_pipelines/settings.py` (`ENVIRONMENT_VARIABLES`), which the code reads its defaults from.",
        "Every process of a deployment reads the same environment (`deploy/optima.env.example`). Settings are",
        "read at run time, never at import time: code locations load with nothing but `OPTIMA_ENV` known. A bad",
        "value is a one-line error naming the variable.",
    ]
    for scope, title in _SCOPES.items():
        names = [n for n, v in ENVIRONMENT_VARIABLES.items() if v.scope == scope]
        if not names:
            continue
        lines += ["", f"## {title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for name in names:
            var = ENVIRONMENT_VARIABLES[name]
            lines.append(f"| `{name}` | {var.default_text} | {var.meaning} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Settings:
    """A snapshot of the deployment's configuration."""

    # Fields that may hold a password or a key never show in a repr (tracebacks, logs).
    database_url: str | None = field(repr=False)
    env: str
    state_dir: Path
    #: Where uploaded reports are read from (OPTIMA_UPLOAD_DIR).
    upload_dir: Path
    secret_key: str | None = field(repr=False)
    dagster_storage_url: str | None = field(repr=False)
    wb_base_url: str | None
    #: None: dagster.yaml's limits stand (the run coordinator replaces them only when these are set); they are
    #: these variables' documented defaults (tests/unit/test_configuration_doc.py).
    sync_queue_concurrency: int | None
    max_concurrent_runs: int | None
    increment_interval_ms: int
    partitions_start: str
    ui_user: str | None = None
    ui_password: str | None = field(default=None, repr=False)
    run_retention_days: int = int(default("OPTIMA_RUN_RETENTION_DAYS"))
    partition_retention_months: int = int(default("OPTIMA_PARTITION_RETENTION_MONTHS"))
    #: Names or shell patterns of sensors/schedules that start stopped (checked by orchestration/cadences.py).
    automations_stopped: tuple[str, ...] = ()
    #: The per-cabinet interval cadences run this many times more often (load drills; orchestration/cadences.py).
    cadence_scale: float = float(default("OPTIMA_CADENCE_SCALE"))
    #: Sweeps (jobs/wb_sync.py): cabinets per run, cabinets at once, how long a busy cabinet is retried.
    sweep_shard_size: int = int(default("OPTIMA_SWEEP_SHARD_SIZE"))
    sweep_threads: int = int(default("OPTIMA_SWEEP_THREADS"))
    sweep_busy_wait_seconds: float = float(default("OPTIMA_SWEEP_BUSY_WAIT_SECONDS"))
    #: How long a single-cabinet run waits for the cabinet lock (warehouse/cabinet_lock.py).
    cabinet_lock_wait_seconds: float = float(default("OPTIMA_CABINET_LOCK_WAIT_SECONDS"))
    #: At most how often the re-aggregation sensor plans (sensors/rnp.py).
    reaggregate_every_seconds: float = float(default("OPTIMA_REAGGREGATE_EVERY_SECONDS"))
    #: Where WB's answers land (landing/store.py); None: the landing is off.
    landing_url: str | None = None
    landing_retention_days: int = int(default("OPTIMA_LANDING_RETENTION_DAYS"))

    @property
    def landing_spool_dir(self) -> Path:
        """The local folder of the processes' landing spools (Arrow streams, published as Parquet)."""
        return self.state_dir / "landing-spool"

    @property
    def warehouse_schema(self) -> str:
        return f"optima_{self.env}"

    @property
    def dagster_schema(self) -> str:
        return f"dagster_{self.env}"

    @property
    def embedded(self) -> bool:
        return not self.database_url


def _int_env(name: str, minimum: int = 1) -> int:
    """An integer from the environment (blank: its documented default); ConfigError naming ``name`` otherwise."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return int(default(name))
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _optional_int_env(name: str, minimum: int = 1) -> int | None:
    return _int_env(name, minimum) if (os.environ.get(name) or "").strip() else None


def float_env(name: str, minimum: float) -> float:
    """A number from the environment (blank: its documented default); ConfigError naming ``name`` otherwise."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return float(default(name))
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:  # also rejects nan
        raise ConfigError(f"{name} must be at least {minimum:g}, got {raw}")
    return value


def validate_env_name(env: str) -> str:
    if not ENV_NAME_RE.match(env):
        raise ConfigError(
            f"OPTIMA_ENV must be lowercase letters, digits and underscores, starting with a letter "
            f"(at most 30 characters), got {env!r}"
        )
    return env


def _partitions_start(start: str) -> str:
    """The first partition day: a real date, not after today (Moscow). A month 13 used to pass a
    pattern check and fail only inside Dagster while the code location loaded, as a traceback; a
    start in the future gave a deployment with no partitions, where every synced day is dropped."""
    if not re.match(r"^\d{4}-\d{2}-\d{2}$", start):
        raise ConfigError(f"OPTIMA_PARTITIONS_START must be YYYY-MM-DD, got {start!r}")
    try:
        day = date.fromisoformat(start)
    except ValueError:
        raise ConfigError(f"OPTIMA_PARTITIONS_START is not a date: {start!r}") from None
    today = today_moscow()
    if day > today:
        raise ConfigError(f"OPTIMA_PARTITIONS_START {start} is after today ({today}): no day would have a partition")
    return start


def load_settings() -> Settings:
    """Read the settings from the environment; raises ConfigError on a bad value."""
    env = validate_env_name((os.environ.get("OPTIMA_ENV") or "").strip() or default("OPTIMA_ENV"))
    state_dir = Path(os.environ.get("OPTIMA_STATE_DIR") or default("OPTIMA_STATE_DIR")).expanduser().resolve()
    start = (os.environ.get("OPTIMA_PARTITIONS_START") or "").strip() or default("OPTIMA_PARTITIONS_START")
    start = _partitions_start(start)
    return Settings(
        database_url=(os.environ.get("OPTIMA_DATABASE_URL") or "").strip() or None,
        env=env,
        state_dir=state_dir,
        upload_dir=Path(os.environ.get("OPTIMA_UPLOAD_DIR") or state_dir / "uploads").expanduser().resolve(),
        secret_key=(os.environ.get("OPTIMA_SECRET_KEY") or "").strip() or None,
        dagster_storage_url=(os.environ.get("OPTIMA_DAGSTER_STORAGE_URL") or "").strip() or None,
        wb_base_url=(os.environ.get("OPTIMA_WB_BASE_URL") or "").strip() or None,
        sync_queue_concurrency=_optional_int_env("SYNC_QUEUE_CONCURRENCY"),
        max_concurrent_runs=_optional_int_env("OPTIMA_MAX_CONCURRENT_RUNS"),
        increment_interval_ms=_int_env("DIGITIZATION_INCREMENT_INTERVAL_MS", minimum=1000),
        partitions_start=start,
        ui_user=(os.environ.get("OPTIMA_UI_USER") or "").strip() or None,
        ui_password=os.environ.get("OPTIMA_UI_PASSWORD") or None,
        run_retention_days=_int_env("OPTIMA_RUN_RETENTION_DAYS"),
        # At least 3: the nightly merge heals the last 90 days, which must stay partitioned.
        partition_retention_months=_int_env("OPTIMA_PARTITION_RETENTION_MONTHS", minimum=3),
        automations_stopped=tuple(
            p.strip() for p in (os.environ.get("OPTIMA_AUTOMATIONS_STOPPED") or "").split(",") if p.strip()
        ),
        cadence_scale=float_env("OPTIMA_CADENCE_SCALE", minimum=1.0),
        sweep_shard_size=_int_env("OPTIMA_SWEEP_SHARD_SIZE"),
        sweep_threads=_int_env("OPTIMA_SWEEP_THREADS"),
        sweep_busy_wait_seconds=float_env("OPTIMA_SWEEP_BUSY_WAIT_SECONDS", minimum=0.0),
        cabinet_lock_wait_seconds=float_env("OPTIMA_CABINET_LOCK_WAIT_SECONDS", minimum=0.1),
        reaggregate_every_seconds=float_env("OPTIMA_REAGGREGATE_EVERY_SECONDS", minimum=0.0),
        landing_url=_landing_url(state_dir),
        landing_retention_days=_int_env("OPTIMA_LANDING_RETENTION_DAYS"),
    )


def _landing_url(state_dir: Path) -> str | None:
    raw = (os.environ.get("OPTIMA_LANDING_URL") or "").strip()
    if raw.lower() in ("off", "none", "0", "false"):
        return None
    return raw or (state_dir / "landing").as_posix()


RUN_LAUNCHERS = ("celery", "spawn")


LOG_FORMATS = ("text", "json")


def log_format(environ: Mapping[str, str] | None = None) -> str:
    """OPTIMA_LOG_FORMAT, checked: ``text`` (the default) or ``json`` (read when logging is installed,
    before any other setting: logs.install)."""
    value = (os.environ if environ is None else environ).get("OPTIMA_LOG_FORMAT", "").strip().lower() or "text"
    if value not in LOG_FORMATS:
        raise ConfigError(f"OPTIMA_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {value!r}")
    return value


def run_launcher_choice(environ: Mapping[str, str] | None = None) -> str:
    """OPTIMA_RUN_LAUNCHER, checked: ``celery`` (the default: warm run workers) or ``spawn``."""
    value = (os.environ if environ is None else environ).get("OPTIMA_RUN_LAUNCHER", "").strip().lower()
    value = value or default("OPTIMA_RUN_LAUNCHER")
    if value not in RUN_LAUNCHERS:
        raise ConfigError(f"OPTIMA_RUN_LAUNCHER must be one of {', '.join(RUN_LAUNCHERS)}, got {value!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    """``python -m optima_pipelines.settings --markdown``: print docs/configuration.md."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m optima_pipelines.settings", description=main.__doc__)
    parser.add_argument("--markdown", action="store_true", required=True, help="print docs/configuration.md")
    parser.parse_args(argv)
    print(configuration_markdown(), end="")


if __name__ == "__main__":
    main()
