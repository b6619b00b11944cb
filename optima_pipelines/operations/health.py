"""Health checks: the warehouse, Dagster's storage, the daemon's heartbeats, the run workers' heartbeats,
the broker and WB's ``/ping``.

Used by ``optima-pipelines health`` (exit 1 naming what failed) and the metrics process's
``/health`` route (503 with the same report). Each check returns a :class:`Check`; none raises.
The database checks run side by side, each within ``CHECK_BUDGET_SECONDS`` (a probe's budget): one
that has not answered by then fails as "no answer within N s" (Dagster's storage alone retries a
refused connection for about 6 s), so a dead database is named in seconds, not tens of seconds.

With the warm run workers (``OPTIMA_RUN_LAUNCHER=celery``), ``run workers`` fails when no run worker
process beat within ``workers.ALIVE_WITHIN_SECONDS`` (naming those that stopped), and ``broker`` when
the broker does not answer (operations/workers.py).

WB's ``/ping`` is asked on the URL the WB client uses for each category (wb/config.py: WB's host,
or ``{OPTIMA_WB_BASE_URL}/{category}`` for the simulator). WB allows 3 ``/ping`` calls per 30 s per host. Every ping any process makes is logged in
``ops_wb_pings``; a check reuses an answer younger than ``PING_REUSE_SECONDS`` instead of asking
again, under a per-host advisory lock, so all health checkers together stay at 2 pings per 30 s
per host at most, whatever polls them (``ops_wb_pings.host`` holds the category).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import current_revision, head_revision
from optima_pipelines.errors import OptimaError
from optima_pipelines.logs import redact, register_secret
from optima_pipelines.operations import workers
from optima_pipelines.settings import run_launcher_choice
from optima_pipelines.warehouse.cabinets import get_token
from optima_pipelines.warehouse.secrets import TokenCipher
from optima_pipelines.wb.config import CATEGORIES, WB_HOSTS, WbConfig

#: The WB API categories our syncs and engines talk to (wb/config.py; wb-api.md §1.1): each host has its /ping.
WB_PING_CATEGORIES: tuple[str, ...] = CATEGORIES
PING_REUSE_SECONDS = 15
PING_TIMEOUT_SECONDS = 5.0
#: How long each database check may take (connect, statements, Dagster's storage calls).
CHECK_BUDGET_SECONDS = 3.0
#: libpq's connect_timeout for the checks (2 s is the least libpq honours).
CONNECT_TIMEOUT_SECONDS = 2
#: A daemon is healthy while its last heartbeat is younger than Dagster's 30-s heartbeat interval plus
#: this: a daemon that stopped fails /health within 2.5 min (Dagster's own default lets 31 min pass).
#: Our daemons' iterations are short (sensors and schedules evaluate in threads), so a live daemon
#: beats every 30 s whatever its sensors do.
DAEMON_TOLERANCE_SECONDS = 120
#: The command that creates an environment's schemas and applies the migrations.
SETUP_COMMAND = "optima-pipelines db upgrade"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def _failure(name: str, exc: Exception) -> Check:
    if isinstance(exc, OptimaError):
        return Check(name, False, redact(str(exc)))
    first = (str(exc).strip().splitlines() or [""])[0]
    return Check(name, False, redact(f"{exc.__class__.__name__}: {first}"))


def _guard(name: str, fn: Callable[[], Check]) -> Check:
    try:
        return fn()
    except Exception as exc:  # a health check reports, it never crashes its caller
        return _failure(name, exc)


def check_warehouse(database_url: str, schema: str, dagster_schema: str | None = None) -> Check:
    """The server answers and the environment is set up: its schemas exist (the warehouse's and, when
    given, Dagster's storage) and the warehouse is at the code's migration. A failure of set-up names
    the command that fixes it."""

    def run() -> Check:
        wanted = [schema, *([dagster_schema] if dagster_schema else [])]
        with connect(database_url, schema, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (str(int(CHECK_BUDGET_SECONDS * 1000)),))
            present = {
                r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (wanted,))
            }
        missing = [name for name in wanted if name not in present]
        if missing:
            return Check(
                "warehouse",
                False,
                f"this environment is not set up: schema {', '.join(missing)} does not exist; run `{SETUP_COMMAND}`",
            )
        current, head = current_revision(database_url, schema), head_revision()
        if current != head:
            return Check(
                "warehouse",
                False,
                f"schema {schema} at migration {current}, code expects {head}; run `{SETUP_COMMAND}`",
            )
        return Check("warehouse", True, f"schema {schema} at {head}")

    return _guard("warehouse", run)


def check_dagster_storage(instance: Callable[[], Any]) -> Check:
    def run() -> Check:
        built = instance()
        built.get_run_records(limit=1)
        return Check("dagster storage", True, f"{type(built.run_storage).__name__} answers")

    return _guard("dagster storage", run)


def check_daemon(instance: Callable[[], Any], tolerance: float = DAEMON_TOLERANCE_SECONDS) -> Check:
    """Every daemon the instance requires has beaten within its heartbeat interval plus ``tolerance``."""

    def run() -> Check:
        from optima_pipelines.orchestration.dagster_internals import DAEMON_HEARTBEAT_INTERVAL_SECONDS, daemon_statuses

        statuses = daemon_statuses(instance(), tolerance)
        if not statuses:
            return Check("daemon", False, "the instance requires no daemon: is this an ephemeral instance?")
        bad = sorted(t for t, s in statuses.items() if s.required and not s.healthy)
        if not bad:
            return Check("daemon", True, f"{len(statuses)} daemons heartbeating")
        beats = [statuses[t].last_heartbeat for t in bad if statuses[t].last_heartbeat is not None]
        if not beats:
            return Check("daemon", False, f"no heartbeat from {', '.join(bad)}: is dagster-daemon running?")
        age = time.time() - max(beat.timestamp for beat in beats)
        return Check(
            "daemon",
            False,
            f"no heartbeat within {DAEMON_HEARTBEAT_INTERVAL_SECONDS + tolerance:g} s from {', '.join(bad)} "
            f"(the last {age:.0f} s ago): is dagster-daemon running?",
        )

    return _guard("daemon", run)


def ping_url(category: str, base_url: str | None) -> str:
    """The /ping of a WB category, at the URL the WB client uses for it: WB's host, or the simulator's
    ``{OPTIMA_WB_BASE_URL}/{category}``."""
    config = WbConfig.for_base_url(base_url) if base_url else WbConfig(base_urls=WB_HOSTS)
    return config.url(category, "/ping")


def _ping_once(client: httpx.Client, url: str, token: str) -> tuple[bool, str]:
    try:
        response = client.get(url, headers={"Authorization": token}, timeout=PING_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        return False, f"unreachable ({exc.__class__.__name__})"
    if response.status_code == 200:
        return True, "200 OK"
    if response.status_code == 429:
        return True, "reachable, rate-limited (429)"
    if response.status_code == 401:
        return False, "token rejected (401): wrong token or token category"
    return False, f"HTTP {response.status_code}"


def _ping_token(conn: psycopg.Connection, cipher: TokenCipher) -> tuple[str, str] | None:
    row = conn.execute(
        "SELECT id FROM cabinets WHERE status = 'active' AND wb_token_encrypted IS NOT NULL ORDER BY id LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    token = get_token(conn, cipher, row[0])
    register_secret(token)
    return row[0], token


def check_wb(
    database_url: str,
    schema: str,
    cipher: TokenCipher,
    base_url: str | None,
    *,
    categories: Sequence[str] = WB_PING_CATEGORIES,
    client: httpx.Client | None = None,
) -> list[Check]:
    """Ping each WB category with the token of the first active cabinet, reusing recent answers."""

    def run() -> list[Check]:
        checks: list[Check] = []
        with (
            connect(database_url, schema, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn,
            httpx.Client() as own_client,
        ):
            http = client or own_client
            found = _ping_token(conn, cipher)
            conn.commit()
            if found is None:
                return [Check("wb", True, "skipped: no active cabinet has a token to ping with")]
            cabinet_id, token = found
            for category in categories:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"optima:wb-ping:{category}",))
                    recent = conn.execute(
                        "SELECT ok, detail, extract(epoch FROM now() - pinged_at) FROM ops_wb_pings "
                        "WHERE host = %s AND pinged_at > now() - make_interval(secs => %s) "
                        "ORDER BY pinged_at DESC LIMIT 1",
                        (category, PING_REUSE_SECONDS),
                    ).fetchone()
                    if recent is not None:
                        ok, detail, age = recent
                        checks.append(Check(f"wb {category}", ok, f"{detail} ({age:.0f} s ago)"))
                        continue
                    ok, detail = _ping_once(http, ping_url(category, base_url), token)
                    conn.execute(
                        "INSERT INTO ops_wb_pings (host, ok, detail) VALUES (%s, %s, %s)", (category, ok, detail)
                    )
                    conn.execute(
                        "DELETE FROM ops_wb_pings WHERE host = %s AND pinged_at < now() - interval '1 hour'",
                        (category,),
                    )
                    checks.append(Check(f"wb {category}", ok, f"{detail} (token of cabinet {cabinet_id})"))
        return checks

    try:
        return run()
    except Exception as exc:  # a health check reports, it never crashes its caller
        return [_failure("wb", exc)]


def check_run_workers(database_url: str, schema: str, within: float = workers.ALIVE_WITHIN_SECONDS) -> Check:
    """At least one run worker process beat within ``within`` seconds; failing, the workers that stopped."""

    def run() -> Check:
        with connect(database_url, schema, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (str(int(CHECK_BUDGET_SECONDS * 1000)),))
            alive = workers.alive_run_workers(conn, within)
            stopped = workers.stopped_run_workers(conn, within)
        if alive:
            names = sorted({w.name for w in alive})
            return Check("run workers", True, f"{len(alive)} processes of {', '.join(names)} beating")
        if not stopped:
            return Check(
                "run workers", False, "no run worker has ever beaten: is `optima-pipelines serve run-worker` running?"
            )
        return Check(
            "run workers",
            False,
            f"no run worker beat within {within:g} s; stopped: {workers.describe_stopped(stopped)}",
        )

    return _guard("run workers", run)


def check_broker() -> Check:
    status = workers.broker_reachable()
    return Check("broker", status.ok, status.detail)


def within_budget(checks: dict[str, Callable[[], Check]], budget: float = CHECK_BUDGET_SECONDS) -> list[Check]:
    """Run the checks side by side; one still running after ``budget`` seconds fails, named. Its
    thread (a daemon) finishes on its own: nothing waits for it, not even the process's exit."""
    results: dict[str, Check] = {}
    threads = []
    for name, fn in checks.items():
        thread = threading.Thread(target=lambda n=name, f=fn: results.__setitem__(n, f()), daemon=True)
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + budget
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [results.get(name) or Check(name, False, f"no answer within {budget:g} s") for name in checks]


def run_checks(
    database_url: str,
    schema: str,
    instance: Callable[[], Any],
    cipher: TokenCipher,
    base_url: str | None,
    *,
    dagster_schema: str | None = None,
    wb: bool = True,
    wb_client: httpx.Client | None = None,
    budget: float = CHECK_BUDGET_SECONDS,
    run_workers: bool | None = None,
) -> list[Check]:
    """Every check. ``instance`` returns the Dagster instance (called inside the checks' budget: on
    a dead database even building one waits on Dagster's connection retries). ``run_workers`` (the
    run workers' heartbeat and the broker) defaults to whether the warm run workers execute the runs
    (``OPTIMA_RUN_LAUNCHER=celery``)."""
    parts: dict[str, Callable[[], Check]] = {
        "warehouse": lambda: check_warehouse(database_url, schema, dagster_schema),
        "dagster storage": lambda: check_dagster_storage(instance),
        "daemon": lambda: check_daemon(instance),
    }
    if run_workers is None:
        run_workers = run_launcher_choice() == "celery"
    if run_workers:
        parts["run workers"] = lambda: check_run_workers(database_url, schema)
        parts["broker"] = check_broker
    checks = within_budget(parts, budget)
    if wb:
        checks += check_wb(database_url, schema, cipher, base_url, client=wb_client)
    return checks
