"""The run workers' heartbeat, their runs' execution claims and the broker's reachability (issue 37), Dagster-free.

**Heartbeat.** Every run worker process (a Celery prefork child of ``serve run-worker``) beats into
``run_workers`` every ``BEAT_SECONDS`` from a thread of its own: its name (``run-worker-1@host``),
host, pid and the runs it executes now. A worker is alive while its last beat is younger than
``ALIVE_WITHIN_SECONDS``; nothing else is looked at (no pid, no host name), so a worker on another
host is judged exactly like a local one, and a host that died is seen dead like a killed process.

**Claims.** Before a worker executes a run it claims it in ``run_claims`` (:func:`claim_run`), in one
transaction under an advisory lock of the run's lineage (the run and the runs retrying it share
``root_run_id``). The claim is refused when the run was claimed before (a redelivered task, a second
launch of the same run) or when another run of the lineage is executing on a live worker (a retry
started while the first execution still lives) or already succeeded. So a run executes at most once
at a time, whatever the broker does. Run monitoring reads a run's health from its claim
(:func:`claim_of`): alive while its worker beats and holds the run, dead once the beats stop, which
is how a run whose worker (or host) died is failed and retried, and how a run whose broker task
state was lost (a Redis restart) is left running.

Readers: orchestration/run_launcher.py (the workers' side and run monitoring), operations/health.py
(``/health`` fails when no worker beats), operations/metrics.py (``optima_run_workers_alive``,
``optima_broker_reachable``). Their public API for other modules: :func:`alive_run_workers`,
:class:`WorkerBeat`, :func:`broker_reachable`, :class:`BrokerStatus`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg

from optima_pipelines.db.sqlfiles import SqlFiles

T = TypeVar("T")

load = SqlFiles(__file__)
logger = logging.getLogger(__name__)

#: How often a run worker process beats.
BEAT_SECONDS = 5.0
#: A worker whose last beat is older than this is dead (four beats missed). With run monitoring's poll
#: (dagster.yaml, 10 s) a run whose worker died is failed within ~35 s of its last beat.
ALIVE_WITHIN_SECONDS = 20.0
#: Rows of workers that stopped beating this long ago are deleted (by the next worker that starts).
FORGET_AFTER = timedelta(days=1)
#: How long the broker check waits for an answer.
BROKER_TIMEOUT_SECONDS = 2.0
OUTCOMES = ("success", "failure", "canceled")


@dataclass(frozen=True)
class WorkerBeat:
    """One run worker process's last beat."""

    id: str
    #: The Celery node name, ``<name>@<host>`` (``serve run-worker --name``).
    name: str
    host: str
    pid: int
    started_at: datetime
    beat_at: datetime
    #: The runs it executes now.
    runs: tuple[str, ...]


def worker_id(name: str, pid: int) -> str:
    return f"{name}/{pid}"


def beat(conn: psycopg.Connection, *, id: str, name: str, host: str, pid: int, runs: Sequence[str]) -> None:
    conn.execute(load("worker_beat"), {"id": id, "name": name, "host": host, "pid": pid, "runs": list(runs)})


def forget(conn: psycopg.Connection, id: str) -> None:
    """A worker that stops cleanly leaves no row behind."""
    conn.execute("DELETE FROM run_workers WHERE id = %s", (id,))


def forget_dead(conn: psycopg.Connection, older_than: timedelta = FORGET_AFTER) -> int:
    return conn.execute("DELETE FROM run_workers WHERE beat_at < now() - %s", (older_than,)).rowcount


def alive_run_workers(conn: psycopg.Connection, within_seconds: float = ALIVE_WITHIN_SECONDS) -> list[WorkerBeat]:
    """The run worker processes that beat within the last ``within_seconds`` (one row per process;
    group by ``name`` for the ``serve run-worker`` commands), ordered by name and pid."""
    rows = conn.execute(load("alive_run_workers"), {"within": within_seconds}).fetchall()
    return [WorkerBeat(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6])) for r in rows]


def stopped_run_workers(
    conn: psycopg.Connection, within_seconds: float = ALIVE_WITHIN_SECONDS, recently: timedelta = FORGET_AFTER
) -> list[WorkerBeat]:
    """The run worker processes that beat in the last ``recently`` but not within ``within_seconds``
    (what ``/health`` names when no worker beats), newest beat first."""
    rows = conn.execute(
        "SELECT id, name, host, pid, started_at, beat_at, runs FROM run_workers "
        "WHERE beat_at <= now() - make_interval(secs => %s) AND beat_at > now() - %s ORDER BY beat_at DESC",
        (within_seconds, recently),
    ).fetchall()
    return [WorkerBeat(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6])) for r in rows]


def describe_stopped(stopped: Sequence[WorkerBeat], now: datetime | None = None) -> str:
    """``run-worker-1@host (4 processes, last beat 35 s ago), ...``: one entry per worker name."""
    from datetime import UTC

    now = now or datetime.now(UTC)
    by_name: dict[str, list[WorkerBeat]] = {}
    for w in stopped:
        by_name.setdefault(w.name, []).append(w)
    parts = []
    for name, beats in sorted(by_name.items(), key=lambda item: max(b.beat_at for b in item[1]), reverse=True):
        age = (now - max(b.beat_at for b in beats)).total_seconds()
        processes = f"{len(beats)} process{'es' if len(beats) > 1 else ''}"
        parts.append(f"{name} ({processes}, last beat {age:.0f} s ago)")
    return ", ".join(parts)


class Heartbeat:
    """A run worker process's beat: a daemon thread writing ``run_workers`` every ``every`` seconds on a
    connection of its own (reopened when it breaks), and at once whenever the runs it holds change."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection],
        *,
        name: str,
        host: str,
        pid: int | None = None,
        every: float = BEAT_SECONDS,
    ):
        self._connect = connect
        self.name, self.host, self.pid = name, host, pid or os.getpid()
        self.id = worker_id(name, self.pid)
        self.every = every
        self._runs: set[str] = set()
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    @property
    def runs(self) -> tuple[str, ...]:
        return tuple(sorted(self._runs))

    def start(self) -> Heartbeat:
        with self._lock:
            if self._conn is None:
                self._beat_locked()
                if self._conn is not None:
                    forget_dead(self._conn)
        self._thread = threading.Thread(target=self._loop, name="run-worker-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.beat_now()

    def beat_now(self) -> bool:
        with self._lock:
            return self._beat_locked()

    def _beat_locked(self) -> bool:
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            beat(self._conn, id=self.id, name=self.name, host=self.host, pid=self.pid, runs=self.runs)
        except Exception as exc:  # the database is away: beat again next time; run monitoring judges
            if not self._failing:
                logger.warning("run worker %s could not beat: %s: %s", self.id, exc.__class__.__name__, exc)
            self._failing = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            return False
        self._failing = False
        return True

    def call(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """``fn(connection)`` on the heartbeat's own connection (reopened if it broke), between beats:
        a worker claims and releases its runs on it rather than opening a connection per run."""
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            return fn(self._conn)

    @contextmanager
    def holding(self, run_id: str) -> Iterator[None]:
        """The worker holds ``run_id`` while inside (beaten at once on entry and exit)."""
        with self._lock:
            self._runs.add(run_id)
            self._beat_locked()
        try:
            yield
        finally:
            with self._lock:
                self._runs.discard(run_id)
                self._beat_locked()

    def stop(self, *, forget_row: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.every + 1)
        with self._lock:
            if self._conn is not None:
                try:
                    if forget_row:
                        forget(self._conn, self.id)
                finally:
                    self._conn.close()
                    self._conn = None


# -- Claims -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimState:
    """A run's claim and its worker's heartbeat (``beat_age`` None: the worker's row is gone)."""

    run_id: str
    root_run_id: str
    worker_id: str
    claimed_at: datetime
    released_at: datetime | None
    outcome: str | None
    worker_name: str | None
    host: str | None
    pid: int | None
    beat_age: float | None
    #: The worker's last beat lists the run.
    held: bool
    #: Seconds since the claim.
    claim_age: float = 0.0

    def alive(self, within_seconds: float = ALIVE_WITHIN_SECONDS) -> bool:
        """Its execution lives: not released, its worker beats and holds it (or has not beaten since
        the claim: its beat with the run may have been lost)."""
        return (
            self.released_at is None
            and self.beat_age is not None
            and self.beat_age < within_seconds
            and (self.held or self.beat_age > self.claim_age)
        )

    def worker(self) -> str:
        if self.worker_name is None:
            name, _, pid = self.worker_id.rpartition("/")
            return f"run worker {name} (pid {pid})"
        return f"run worker {self.worker_name} (pid {self.pid})"

    def why_dead(self, within_seconds: float = ALIVE_WITHIN_SECONDS) -> str:
        """Why its execution is not alive, in words (for a run monitoring's verdict)."""
        if self.released_at is not None:
            return f"its execution on {self.worker()} ended ({self.outcome or 'unknown outcome'})"
        if self.beat_age is None:
            return f"{self.worker()} that executes it has no heartbeat (it stopped)"
        if self.beat_age >= within_seconds:
            return f"{self.worker()} that executes it stopped beating {self.beat_age:.0f} s ago"
        return f"{self.worker()} beats but no longer holds the run (its execution ended unrecorded)"


@dataclass(frozen=True)
class Refusal:
    """Why a worker must not execute a run: another execution of it (or of its lineage) claimed it."""

    reason: str
    #: The run whose claim stands in the way (the run itself, or another of its lineage).
    other_run_id: str


def _claims(conn: psycopg.Connection, run_id: str, root_run_id: str) -> list[ClaimState]:
    rows = conn.execute(load("run_claims_of"), {"run_id": run_id, "root_run_id": root_run_id}).fetchall()
    return [ClaimState(*r) for r in rows]


def refusal(run_id: str, claims: Sequence[ClaimState], within_seconds: float = ALIVE_WITHIN_SECONDS) -> Refusal | None:
    """Whether a run may be executed, given its lineage's claims (pure: the rule of :func:`claim_run`)."""
    for c in claims:
        if c.run_id == run_id:
            state = "executes it" if c.alive(within_seconds) else "claimed it before"
            return Refusal(f"run {run_id} is not executed twice: {c.worker()} {state}", run_id)
    for c in claims:
        if c.alive(within_seconds):
            return Refusal(
                f"run {c.run_id}, which run {run_id} retries, still executes on {c.worker()}: not executed twice",
                c.run_id,
            )
    for c in claims:
        if c.outcome == "success":
            return Refusal(f"run {c.run_id}, which run {run_id} retries, already succeeded", c.run_id)
    return None


def claim_run(
    conn: psycopg.Connection,
    run_id: str,
    root_run_id: str,
    worker: str,
    within_seconds: float = ALIVE_WITHIN_SECONDS,
) -> Refusal | None:
    """Claim the execution of ``run_id`` for ``worker`` (a :func:`worker_id`); None when claimed, else
    why not. Committed before it returns: the claim is on record before the run starts."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('optima:run-lineage'), hashtext(%s))", (root_run_id,))
        found = refusal(run_id, _claims(conn, run_id, root_run_id), within_seconds)
        if found is None:
            conn.execute(
                "INSERT INTO run_claims (run_id, root_run_id, worker_id) VALUES (%s, %s, %s)",
                (run_id, root_run_id, worker),
            )
    return found


def release_run(conn: psycopg.Connection, run_id: str, outcome: str) -> None:
    if outcome not in OUTCOMES:
        raise ValueError(f"a claim is released with one of {OUTCOMES}, not {outcome!r}")
    conn.execute(
        "UPDATE run_claims SET released_at = now(), outcome = %s WHERE run_id = %s AND released_at IS NULL",
        (outcome, run_id),
    )


def claim_of(conn: psycopg.Connection, run_id: str) -> ClaimState | None:
    """The run's own claim with its worker's heartbeat; None when no worker claimed it."""
    for c in _claims(conn, run_id, run_id):
        if c.run_id == run_id:
            return c
    return None


def prune_claims(conn: psycopg.Connection, claimed_before: datetime) -> int:
    """Delete the released claims made before ``claimed_before`` (the nightly prune_runs job)."""
    return conn.execute(
        "DELETE FROM run_claims WHERE released_at IS NOT NULL AND claimed_at < %s", (claimed_before,)
    ).rowcount


# -- The broker -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerStatus:
    ok: bool
    #: What was reached, or what failed (the URL's password masked).
    detail: str


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


def broker_reachable(environ: Mapping[str, str] | None = None, timeout: float = BROKER_TIMEOUT_SECONDS) -> BrokerStatus:
    """Whether the run workers' broker (``OPTIMA_RUN_WORKER_BROKER_URL``; unset: Dagster's PostgreSQL
    schema) answers within ``timeout`` seconds. Never raises. With ``OPTIMA_RUN_LAUNCHER=spawn`` there
    is no broker: ok."""
    from optima_pipelines.orchestration.run_launcher import SQLA_TRANSPORT_ALIAS, broker_and_backend
    from optima_pipelines.settings import run_launcher_choice

    env = os.environ if environ is None else environ
    if run_launcher_choice(env) != "celery":
        return BrokerStatus(True, "no broker (OPTIMA_RUN_LAUNCHER=spawn)")
    try:
        broker, _backend = broker_and_backend(env)
    except Exception as exc:
        return BrokerStatus(False, str(exc))
    shown = mask_url(broker.partition("+")[2] if broker.startswith(f"{SQLA_TRANSPORT_ALIAS}+") else broker)
    try:
        if broker.startswith(("redis://", "rediss://")):
            import redis

            client = redis.Redis.from_url(broker, socket_connect_timeout=timeout, socket_timeout=timeout)
            try:
                client.ping()
            finally:
                client.close()
        elif broker.startswith(f"{SQLA_TRANSPORT_ALIAS}+"):
            from optima_pipelines.db.connection import connect

            with connect(broker.partition("+")[2], connect_timeout=max(2, int(timeout))) as conn:
                conn.execute("SELECT 1")
        else:
            from kombu import Connection

            with Connection(broker, connect_timeout=timeout) as conn:
                conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return BrokerStatus(False, f"broker {shown} unreachable: {exc.__class__.__name__}: {first}"[:300])
    return BrokerStatus(True, f"broker {shown} answers")
