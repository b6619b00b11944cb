"""The cabinet lock: at most one unit of WB work per cabinet at a time, in any run, in any process.

A run that serves one cabinet is gated by the ``optima/cabinet`` tag in the queue; a sweep (one run
over many cabinets, jobs/wb_sync.py) carries no cabinet tag, so the gate that holds across both is
a PostgreSQL advisory lock per cabinet, taken by every unit of WB work before it reads or writes
anything of the cabinet's: a session lock on a connection of its own, released when the work ends,
and by PostgreSQL itself when the connection goes (the process crashed or was killed).

- A sweep *tries* the lock and moves on to other cabinets when it is held (``try_acquire``), and
  records the cabinet as account-busy if it stays held.
- A single-cabinet run (a person's request, a partition from the UI, a resume, a retry) *waits*
  for it (``acquire(wait)``): a sweep's cabinet yields at its next page boundary once somebody
  waits (``waited_for``), so the wait is a few seconds, never a whole sweep.

Dagster-free: it needs only a way to connect to the warehouse.
"""

from __future__ import annotations

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


class CabinetLock:
    """The lock of one cabinet, on a connection of its own (autocommit: the lock outlives the
    transactions of the work it guards). Use ``with`` after a successful acquire, or ``held(...)``."""

    def __init__(self, connect: Callable[..., psycopg.Connection], cabinet_id: str):
        self.cabinet_id = cabinet_id
        self.key = lock_key(cabinet_id)
        self._connect = connect
        self._conn: psycopg.Connection | None = None

    def _open(self) -> psycopg.Connection:
        if self._conn is None:
            self._conn = self._connect()
            self._conn.autocommit = True
        return self._conn

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False (and no connection kept) if another holds it."""
        got = self._open().execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_SPACE, self.key)).fetchone()
        if not (got and got[0]):
            self.close()
            return False
        return True

    def acquire(self, wait_seconds: float) -> None:
        """Take the lock, waiting at most ``wait_seconds`` for its holder; ``CabinetBusy`` after that."""
        conn = self._open()
        try:
            conn.execute(f"SET lock_timeout = {max(1, int(wait_seconds * 1000))}")
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_SPACE, self.key))
            conn.execute("RESET lock_timeout")
        except psycopg.errors.LockNotAvailable:
            self.close()
            raise CabinetBusy(
                f"cabinet {self.cabinet_id} is busy: another run's WB work on it did not end within "
                f"{wait_seconds:g} s (OPTIMA_CABINET_LOCK_WAIT_SECONDS)"
            ) from None

    def waited_for(self) -> bool:
        """Whether another unit of work waits for this lock (a person's run behind a sweep's cabinet)."""
        if self._conn is None:
            return False
        row = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s::oid AND objid = %s::oid AND objsubid = 2)",
            (LOCK_SPACE, self.key & 0xFFFFFFFF),
        ).fetchone()
        return bool(row and row[0])

    @property
    def connection(self) -> psycopg.Connection:
        """The lock's own connection (autocommit), for bookkeeping that should not open another."""
        return self._open()

    def close(self) -> None:
        """Release the lock (closing the session releases it, whatever state it is in)."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

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
