"""The cabinet lock: at most one unit of WB work per cabinet at a time, in any run, in any process.

A run that serves one cabinet is gated by the ``optima/cabinet`` tag in the queue; a sweep (one run
over many cabinets, jobs/wb_sync.py) carries no cabinet tag, so the gate that holds across both is
a PostgreSQL advisory lock per cabinet, taken by every unit of WB work before it reads or writes
anything of the cabinet's: a session lock on a connection of its own, released when the work ends,
and by PostgreSQL itself when the connection goes (the process crashed or was killed).

- A sweep *tries* the lock and moves on to other cabinets when it is held (``try_acquire``), and
  records the cabinet as account-busy if it stays held. Its cabinets' locks share one session of
  the run (``LockSession``), so that a lock costs no connection of its own: a sweep of eight
  threads holds one session for its locks, not eight (PostgreSQL's max_connections is shared by
  every run).
- A single-cabinet run (a person's request, a partition from the UI, a resume, a retry) *waits*
  for it (``acquire(wait)``): a sweep's cabinet yields at its next page boundary once somebody
  waits (``waited_for``), so the wait is a few seconds, never a whole sweep.

Dagster-free: it needs only a way to connect to the warehouse.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from types import TracebackType

import psycopg

from optima_pipelines.errors import OptimaError

#: The advisory lock space of cabinet locks (the first of the two int4 keys): "OPTC".
LOCK_SPACE = 0x4F505443


class CabinetBusy(OptimaError):
    """Another unit of WB work holds the cabinet longer than this one may wait."""


def lock_key(cabinet_id: str) -> int:
    """The cabinet's int4 key in ``LOCK_SPACE`` (CRC-32, as a signed 32-bit integer). Two cabinets
    sharing a key only serialise with each other: the lock stays a gate, never a leak."""
    crc = zlib.crc32(cabinet_id.encode())
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def _release_and_close(conn: psycopg.Connection, unlock: str | None) -> None:
    """Release the session's locks, then close it. A closed session releases them too, but not at
    once: a pool's connection (db.connection.Pool) is reset in the pool's background thread, and a
    plain one when its server process has ended; the next run to try the cabinet would find it taken."""
    try:
        if unlock and not conn.closed:
            conn.execute(unlock)
    except psycopg.Error:
        pass  # a broken session: the server ends it, and its locks with it
    finally:
        conn.close()


def _waited_for(conn: psycopg.Connection, key: int) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s::oid AND objid = %s::oid AND objsubid = 2)",
        (LOCK_SPACE, key & 0xFFFFFFFF),
    ).fetchone()
    return bool(row and row[0])


class LockSession:
    """One session (autocommit) that holds the locks of many cabinets at once: a sweep's, whose
    threads try, release and look at their cabinets' locks through it, one statement at a time.
    PostgreSQL lets a session take the same advisory lock twice, so the session itself refuses a
    cabinet it already holds (two slots of one cabinet in one repricer sweep stay one at a time).
    Its locks go with the session: ``close()``, the end of the run, or its process killed."""

    def __init__(self, connect: Callable[..., psycopg.Connection]):
        self._connect = connect
        self._conn: psycopg.Connection | None = None
        self._held: set[int] = set()
        self._mutex = threading.Lock()

    def _open(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            self._conn.autocommit = True
            self._held.clear()  # a session that went took its locks with it
        return self._conn

    def lock(self, cabinet_id: str) -> CabinetLock:
        """The cabinet's lock in this session (not taken yet: ``try_acquire``)."""
        return CabinetLock(self._connect, cabinet_id, session=self)

    def try_lock(self, key: int) -> bool:
        with self._mutex:
            if key in self._held:
                return False
            got = self._open().execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_SPACE, key)).fetchone()
            if got and got[0]:
                self._held.add(key)
                return True
            return False

    def unlock(self, key: int) -> None:
        with self._mutex:
            if key not in self._held or self._conn is None:
                return
            self._held.discard(key)
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_SPACE, key))
            except psycopg.Error:  # the session is broken: closing it releases every lock it held
                self._conn.close()

    def waited_for(self, key: int) -> bool:
        with self._mutex:
            return _waited_for(self._open(), key)

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                held_any = bool(self._held)
                self._held.clear()
                _release_and_close(conn, "SELECT pg_advisory_unlock_all()" if held_any else None)

    def __enter__(self) -> LockSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CabinetLock:
    """The lock of one cabinet: on a connection of its own (autocommit: the lock outlives the
    transactions of the work it guards), or in a sweep's ``LockSession``. Use ``with`` after a
    successful acquire, or ``held(...)``."""

    def __init__(self, connect: Callable[..., psycopg.Connection], cabinet_id: str, session: LockSession | None = None):
        self.cabinet_id = cabinet_id
        self.key = lock_key(cabinet_id)
        self._connect = connect
        self._conn: psycopg.Connection | None = None
        self._session = session
        self._in_session = False
        #: Whether this lock's own connection holds the lock (taken, not yet released).
        self._locked = False

    def _open(self) -> psycopg.Connection:
        if self._conn is None:
            self._conn = self._connect()
            self._conn.autocommit = True
        return self._conn

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False (and no connection kept) if another holds it."""
        if self._session is not None:
            self._in_session = self._session.try_lock(self.key)
            return self._in_session
        got = self._open().execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_SPACE, self.key)).fetchone()
        if not (got and got[0]):
            self.close()
            return False
        self._locked = True
        return True

    def acquire(self, wait_seconds: float) -> None:
        """Take the lock, waiting at most ``wait_seconds`` for its holder; ``CabinetBusy`` after that."""
        if self._session is not None:
            raise ValueError("a lock in a sweep's session is tried, never waited for")
        conn = self._open()
        try:
            conn.execute(f"SET lock_timeout = {max(1, int(wait_seconds * 1000))}")
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_SPACE, self.key))
            self._locked = True
            conn.execute("RESET lock_timeout")
        except psycopg.errors.LockNotAvailable:
            self.close()
            raise CabinetBusy(
                f"cabinet {self.cabinet_id} is busy: another run's WB work on it did not end within "
                f"{wait_seconds:g} s (OPTIMA_CABINET_LOCK_WAIT_SECONDS)"
            ) from None

    def waited_for(self) -> bool:
        """Whether another unit of work waits for this lock (a person's run behind a sweep's cabinet)."""
        if self._in_session and self._session is not None:
            return self._session.waited_for(self.key)
        if self._conn is None:
            return False
        return _waited_for(self._conn, self.key)

    def close(self) -> None:
        """Release the lock now, then close its session (whose closing would release it too, but later)."""
        if self._in_session and self._session is not None:
            self._in_session = False
            self._session.unlock(self.key)
        if self._conn is not None:
            conn, self._conn, locked = self._conn, None, self._locked
            self._locked = False
            _release_and_close(conn, f"SELECT pg_advisory_unlock({LOCK_SPACE}, {self.key})" if locked else None)

    def __enter__(self) -> CabinetLock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def held(connect: Callable[..., psycopg.Connection], cabinet_id: str, wait_seconds: float) -> CabinetLock:
    """The cabinet's lock, taken (waiting up to ``wait_seconds``): ``with held(...) as lock: ...``."""
    lock = CabinetLock(connect, cabinet_id)
    lock.acquire(wait_seconds)
    return lock
