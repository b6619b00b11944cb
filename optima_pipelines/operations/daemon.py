"""dagster-daemon, its sensor loop every second, alone on its storage: ``optima-pipelines serve daemon`` runs it
in its own process (:func:`run`), ``python -m optima_pipelines.operations.daemon run -w WORKSPACE`` as it is.

**One daemon per storage.** Two daemons on one Dagster storage launch the same queued runs twice
(issue 37: 3 of 20 runs executed twice with a second ``dev`` on the same state folder). The daemon
holds a PostgreSQL advisory lock of its storage (the database and schema of
``OPTIMA_DAGSTER_STORAGE_URL``) for its whole life, on a session named after its host and pid; a
second one refuses to start, in one line naming the first (:class:`DaemonLock`). ``dev`` and
``serve daemon`` ask before they start anything (:func:`refuse_if_running`). A watchdog looks at the
lock's session every ``WATCH_SECONDS``: when the session is lost (PostgreSQL restarted) it takes the
lock again, and when another daemon took it meanwhile this one stops.

Dagster's sensor daemon wakes every 5 s (a constant, not a setting) and evaluates the sensors
whose ``minimum_interval_seconds`` has passed. A user import waits for two sensor ticks (the
requests sensor launches the import, the re-aggregation sensor its РНП), so with a 5-s loop a
sensor's interval cannot go below 5 s and each tick costs 2.5 s on average however short its interval
(bench/freshness.py). With a 1-s loop, a sensor with a 2-s interval ticks every 2 s. The loop only
compares timestamps between ticks: the sensors' own intervals keep their cost bounded.

The daemon also stores events in batches (``enable_event_batches``, as the run workers do). A run a
sensor or a backfill creates gets an ASSET_MATERIALIZATION_PLANNED event per asset and partition,
written by the daemon while it creates the run: a re-aggregation run over 1,000 cabinets × 2 days
is 8,000 of them; dagster-postgres stores such a batch one event at a time, which held the sensor's
tick (and so its next tick) 7-15 s a run (issue 17's scale bench: ticks 385 s apart at N = 1,000),
so our storage stores them in one INSERT (``dagster_internals.store_planned_events_in_batches``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path

import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.urls import describe_server
from optima_pipelines.errors import ConfigError

#: How often the daemon's sensor loop wakes (Dagster's default: 5 s).
SENSOR_LOOP_SECONDS = 1
#: The advisory lock's first key (the second: the storage's schema).
LOCK_NAME = "optima_pipelines.daemon"
#: How often the daemon looks that it still holds its lock.
WATCH_SECONDS = 10.0
STORAGE_URL_ENV = "OPTIMA_DAGSTER_STORAGE_URL"

logger = logging.getLogger(__name__)

_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))"
_HOLDER = (
    "SELECT a.application_name, host(a.client_addr), a.backend_start FROM pg_locks l "
    "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
    "AND l.classid = hashtext(%s)::oid AND l.objid = hashtext(%s)::oid"
)


def storage_schema(storage_url: str) -> str:
    """The schema of a Dagster storage URL (its ``options=-csearch_path=...``; public without one)."""
    from optima_pipelines.db.urls import parse_url

    options = str(parse_url(storage_url).query.get("options") or "")
    for part in options.replace("-c ", "-c").split():
        if part.startswith("-csearch_path="):
            return part.removeprefix("-csearch_path=").split(",")[0].strip() or "public"
    return "public"


class DaemonLock:
    """The storage's daemon lock, held on a session of its own while the daemon lives."""

    def __init__(self, storage_url: str):
        self.storage_url = storage_url
        self.schema = storage_schema(storage_url)
        self.conn: psycopg.Connection | None = None
        self.owner = f"optima daemon on {socket.gethostname()} pid {os.getpid()}"

    def acquire(self) -> None:
        """Take the lock; raises ConfigError naming the daemon that holds it."""
        conn = connect(self.storage_url, autocommit=True, connect_timeout=5, application_name=self.owner)
        try:
            row = conn.execute(_TRY_LOCK, (LOCK_NAME, self.schema)).fetchone()
            if not (row and row[0]):
                raise ConfigError(self._refusal(conn))
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def _refusal(self, conn: psycopg.Connection) -> str:
        row = conn.execute(_HOLDER, (LOCK_NAME, self.schema)).fetchone()
        storage = f"{describe_server(self.storage_url)}, schema {self.schema}"
        if row is None:  # released meanwhile, or its session is not visible to this role
            return f"another daemon runs on this Dagster storage ({storage}); stop it first"
        name, addr, since = row
        who = name or "a session without a name"
        return (
            f"another daemon runs on this Dagster storage ({storage}): {who}, connected from "
            f"{addr or 'a local socket'} since {since:%Y-%m-%d %H:%M:%S %Z}; stop it first"
        )

    def held(self) -> bool:
        """Whether the lock's session lives (a SELECT on it)."""
        if self.conn is None or self.conn.closed:
            return False
        try:
            self.conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            self.conn.close()
            return False

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()  # the session's end releases its advisory locks
            self.conn = None


def refuse_if_running(storage_url: str) -> None:
    """Raise ConfigError naming the daemon that runs on this storage, if one does (the lock is taken
    and given back at once: the daemon itself holds it for good)."""
    lock = DaemonLock(storage_url)
    lock.acquire()
    lock.release()


def _watch(lock: DaemonLock, stop: threading.Event) -> None:
    """Keep the lock: take it again after its session was lost; stop this daemon when another took it."""
    while not stop.wait(WATCH_SECONDS):
        if lock.held():
            continue
        try:
            lock.acquire()
            logger.warning("the daemon's lock session was lost; lock taken again")
        except ConfigError as exc:
            print(f"error: {exc}; this daemon stops", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        except Exception as exc:  # the database is away: try again at the next look
            logger.warning("the daemon's lock could not be taken again: %s", exc)


def run(workspace: Path) -> None:
    """The daemon in this process, on the code server of ``workspace`` (``serve daemon``, after its
    checks): one interpreter and its imports, not a second one started for it."""
    # Started in the background by a shell, the process ignores SIGINT; Dagster maps SIGTERM onto
    # SIGINT's handler, which must stop the daemon.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["dagster-daemon", "run", "-w", str(workspace)]
    main()


def main() -> None:
    from optima_pipelines.orchestration.dagster_internals import (
        enable_event_batches,
        run_dagster_daemon,
        set_sensor_loop_seconds,
    )

    storage_url = os.environ.get(STORAGE_URL_ENV, "").strip()
    lock: DaemonLock | None = None
    if storage_url:
        lock = DaemonLock(storage_url)
        try:
            lock.acquire()
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            sys.exit(1)
        threading.Thread(target=_watch, args=(lock, threading.Event()), name="daemon-lock", daemon=True).start()
    set_sensor_loop_seconds(SENSOR_LOOP_SECONDS)
    enable_event_batches()
    sys.argv[0] = "dagster-daemon"
    try:
        run_dagster_daemon()
    finally:
        if lock is not None:
            lock.release()


if __name__ == "__main__":
    main()
