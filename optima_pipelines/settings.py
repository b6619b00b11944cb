"""Deployment settings, read from the environment in one place.

Every environment variable the deployment reads is declared here (and listed in the README).
Nothing here connects to anything; `optima_pipelines.db` turns these settings into connections.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from optima_pipelines.errors import ConfigError
from optima_pipelines.timeutil import today_moscow

ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,29}$")

#: Environment variables, with what each one means. The README's configuration table mirrors this.
ENVIRONMENT_VARIABLES: dict[str, str] = {
    "OPTIMA_DATABASE_URL": "PostgreSQL server for the warehouse and Dagster's storage "
    "(postgresql://user:password@host:port/db). Unset: a private embedded server in the state folder.",
    "OPTIMA_ENV": "Environment name (dev, stage, prod, ...): selects the warehouse schema optima_<env> "
    "and Dagster's storage schema dagster_<env> on the same server. Default dev.",
    "OPTIMA_STATE_DIR": "Folder for local state: the embedded PostgreSQL, DAGSTER_HOME, the generated "
    "token key. Default .optima in the working directory.",
    "OPTIMA_SECRET_KEY": "Fernet key that encrypts WB tokens at rest. Unset: a key generated once and "
    "kept in the state folder (secret.key).",
    "OPTIMA_DAGSTER_STORAGE_URL": "Dagster storage URL (postgresql+psycopg2://...). Derived from "
    "OPTIMA_DATABASE_URL and OPTIMA_ENV by the CLI; set it only to put Dagster's storage elsewhere.",
    "OPTIMA_WB_BASE_URL": "One base URL for every WB category, path-prefixed by category "
    "(the simulator's address). Unset: WB's real hosts.",
    "OPTIMA_WB_TIME_SCALE": "Only with the WB simulator running a faster clock: divides WB's rate-limit "
    "periods and pauses by this factor. Default 1 (WB's real limits).",
    "SYNC_QUEUE_CONCURRENCY": "How many cabinets the six sync queues process at once, in total. Default 5 "
    "(dagster.yaml's).",
    "OPTIMA_MAX_CONCURRENT_RUNS": "How many runs the deployment runs at once, every queue together. Default 6 "
    "(dagster.yaml's, sized for 2 cores); keep it above SYNC_QUEUE_CONCURRENCY so user work finds a slot.",
    "DIGITIZATION_INCREMENT_INTERVAL_MS": "Interval of the orders/sales increment. Default 1800000 (30 min).",
    "OPTIMA_CADENCE_SCALE": "For load drills and benchmarks (bench/scale.py): the per-cabinet interval cadences "
    "(the increment, ads, funnel, prices, auto-replies) run this many times more often, their windows as much "
    "shorter; a scaled interval under 20 s is an error. Default 1 (the real cadences).",
    "OPTIMA_SWEEP_SHARD_SIZE": "Cabinets per sweep run: a scheduled cadence runs one run per window over every due "
    "cabinet, split into runs of at most this many. Default 250.",
    "OPTIMA_SWEEP_THREADS": "Cabinets a sweep run syncs at once (WB calls are I/O; each cabinet keeps its own WB "
    "limits). Default 8.",
    "OPTIMA_SWEEP_BUSY_WAIT_SECONDS": "How long a sweep keeps coming back to a cabinet whose lock another run holds "
    "before it records the cabinet as account-busy for the window. Default 30.",
    "OPTIMA_REAGGREGATE_EVERY_SECONDS": "At most how often the re-aggregation sensor plans РНП recomputes of the "
    "scheduled syncs' changes (what came meanwhile waits and goes in the same few runs; a user's feed import "
    "recomputes its own days in its run). Default 60; 0: every tick.",
    "OPTIMA_CABINET_LOCK_WAIT_SECONDS": "How long a single-cabinet run (a request, a partition, a resume) waits for "
    "the cabinet's lock held by another run before it fails as busy (and is retried). Default 120.",
    "OPTIMA_PARTITIONS_START": "First Moscow day of the cabinet x day partitions. Default 2025-01-01.",
    "OPTIMA_UI_USER": "User name of the Dagster UI's HTTP basic auth. Set it and OPTIMA_UI_PASSWORD to require "
    "a login on every route; unset, the UI runs without auth (and says so).",
    "OPTIMA_UI_PASSWORD": "Password of the Dagster UI's HTTP basic auth (with OPTIMA_UI_USER).",
    "OPTIMA_RUN_RETENTION_DAYS": "Successful runs older than this many days are deleted by the nightly "
    "prune_runs maintenance job (failed runs are kept). Default 7.",
    "OPTIMA_PARTITION_RETENTION_MONTHS": "Months of rnp_daily (and its rollups) kept before the current one: "
    "the weekly partition-manager drops older table partitions. Default 24, at least 3.",
    "OPTIMA_RUN_LAUNCHER": "How a run's worker starts: celery (a task in a long-lived, already warm run worker, "
    "`optima-pipelines serve run-worker`; dev starts one) or spawn (Dagster's DefaultRunLauncher: the code server "
    "spawns a fresh process per run that imports Dagster and the definitions). Default celery.",
    "OPTIMA_RUN_WORKER_BROKER_URL": "With OPTIMA_RUN_LAUNCHER=celery: the Celery broker that hands runs to the run workers "
    "(redis://host:6379/0 in production). Unset: kombu's SQLAlchemy transport on Dagster's own PostgreSQL schema "
    "(no new server; termination then goes through the run's status, as it always does).",
    "OPTIMA_CODE_SERVER_FORKSERVER": "1: with OPTIMA_RUN_LAUNCHER=spawn, the code server forks the run workers from a forkserver that "
    "imported Dagster and the definitions once (issue 17's way (b), kept for bench/orchestration.py's comparison; "
    "OPTIMA_RUN_LAUNCHER=celery is the faster way). Default unset (spawn, Dagster's own).",
    "OPTIMA_LOG_FORMAT": "How every process prints its log lines: text (one line with run_id= and cabinet=) or json "
    "(one JSON object a line: time, level, logger, message, run_id, job, queue, cabinet, exc). Tokens are masked "
    "in both. Default text.",
    "OPTIMA_AUTOMATIONS_STOPPED": "Sensors and schedules that start stopped in this deployment, comma-separated "
    "names or shell patterns (e.g. autobidder_*,repricer_sensor on a staging copy, so its engines never act on "
    "WB). An operator can still start them in the UI. A pattern that names nothing is an error. Default: none.",
}


@dataclass(frozen=True)
class Settings:
    """A snapshot of the deployment's configuration."""

    # Fields that may hold a password or a key never show in a repr (tracebacks, logs).
    database_url: str | None = field(repr=False)
    env: str
    state_dir: Path
    secret_key: str | None = field(repr=False)
    dagster_storage_url: str | None = field(repr=False)
    wb_base_url: str | None
    #: None: dagster.yaml's limits stand (the run coordinator replaces them only when these are set).
    sync_queue_concurrency: int | None
    max_concurrent_runs: int | None
    increment_interval_ms: int
    partitions_start: str
    ui_user: str | None = None
    ui_password: str | None = field(default=None, repr=False)
    run_retention_days: int = 7
    partition_retention_months: int = 24
    #: Names or shell patterns of sensors/schedules that start stopped (checked by orchestration/cadences.py).
    automations_stopped: tuple[str, ...] = ()
    #: The per-cabinet interval cadences run this many times more often (load drills; orchestration/cadences.py).
    cadence_scale: float = 1.0
    #: Sweeps (jobs/wb_sync.py): cabinets per run, cabinets at once, how long a busy cabinet is retried.
    sweep_shard_size: int = 250
    sweep_threads: int = 8
    sweep_busy_wait_seconds: float = 30.0
    #: How long a single-cabinet run waits for the cabinet lock (warehouse/cabinet_lock.py).
    cabinet_lock_wait_seconds: float = 120.0
    #: At most how often the re-aggregation sensor plans (sensors/rnp.py).
    reaggregate_every_seconds: float = 60.0

    @property
    def warehouse_schema(self) -> str:
        return f"optima_{self.env}"

    @property
    def dagster_schema(self) -> str:
        return f"dagster_{self.env}"

    @property
    def embedded(self) -> bool:
        return not self.database_url


def _int_env(name: str, default: int, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _optional_int_env(name: str, minimum: int = 1) -> int | None:
    return _int_env(name, 0, minimum) if (os.environ.get(name) or "").strip() else None


def float_env(name: str, default: float, minimum: float) -> float:
    """A number from the environment (blank: ``default``); ConfigError naming ``name`` otherwise."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return default
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
    env = validate_env_name(os.environ.get("OPTIMA_ENV", "dev").strip() or "dev")
    state_dir = Path(os.environ.get("OPTIMA_STATE_DIR") or ".optima").expanduser().resolve()
    start = _partitions_start(os.environ.get("OPTIMA_PARTITIONS_START", "2025-01-01").strip())
    return Settings(
        database_url=(os.environ.get("OPTIMA_DATABASE_URL") or "").strip() or None,
        env=env,
        state_dir=state_dir,
        secret_key=(os.environ.get("OPTIMA_SECRET_KEY") or "").strip() or None,
        dagster_storage_url=(os.environ.get("OPTIMA_DAGSTER_STORAGE_URL") or "").strip() or None,
        wb_base_url=(os.environ.get("OPTIMA_WB_BASE_URL") or "").strip() or None,
        sync_queue_concurrency=_optional_int_env("SYNC_QUEUE_CONCURRENCY"),
        max_concurrent_runs=_optional_int_env("OPTIMA_MAX_CONCURRENT_RUNS"),
        increment_interval_ms=_int_env("DIGITIZATION_INCREMENT_INTERVAL_MS", 30 * 60 * 1000, minimum=1000),
        partitions_start=start,
        ui_user=(os.environ.get("OPTIMA_UI_USER") or "").strip() or None,
        ui_password=os.environ.get("OPTIMA_UI_PASSWORD") or None,
        run_retention_days=_int_env("OPTIMA_RUN_RETENTION_DAYS", 7),
        # At least 3: the nightly merge heals the last 90 days, which must stay partitioned.
        partition_retention_months=_int_env("OPTIMA_PARTITION_RETENTION_MONTHS", 24, minimum=3),
        automations_stopped=tuple(
            p.strip() for p in (os.environ.get("OPTIMA_AUTOMATIONS_STOPPED") or "").split(",") if p.strip()
        ),
        cadence_scale=float_env("OPTIMA_CADENCE_SCALE", 1.0, minimum=1.0),
        sweep_shard_size=_int_env("OPTIMA_SWEEP_SHARD_SIZE", 250),
        sweep_threads=_int_env("OPTIMA_SWEEP_THREADS", 8),
        sweep_busy_wait_seconds=float_env("OPTIMA_SWEEP_BUSY_WAIT_SECONDS", 30.0, minimum=0.0),
        cabinet_lock_wait_seconds=float_env("OPTIMA_CABINET_LOCK_WAIT_SECONDS", 120.0, minimum=0.1),
        reaggregate_every_seconds=float_env("OPTIMA_REAGGREGATE_EVERY_SECONDS", 60.0, minimum=0.0),
    )


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
    value = (os.environ if environ is None else environ).get("OPTIMA_RUN_LAUNCHER", "").strip().lower() or "celery"
    if value not in RUN_LAUNCHERS:
        raise ConfigError(f"OPTIMA_RUN_LAUNCHER must be one of {', '.join(RUN_LAUNCHERS)}, got {value!r}")
    return value
