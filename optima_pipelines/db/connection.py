"""Connections to the warehouse: psycopg 3, with the environment's schema as the search path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from optima_pipelines.db.urls import describe_server, libpq_url
from optima_pipelines.errors import DatabaseUnavailable

#: Opens a warehouse connection, a context manager that commits or rolls back (``Warehouse.connect``,
#: ``db.connect``): what the Dagster-free code is handed instead of a resource.
Connect = Callable[[], psycopg.Connection]

#: What pg_stat_activity shows for our connections; a run's adds its job (`optima_pipelines/<job>`).
APPLICATION_NAME = "optima_pipelines"


def connect(
    url: str,
    schema: str | None = None,
    *,
    autocommit: bool = False,
    connect_timeout: int = 10,
    application_name: str = APPLICATION_NAME,
) -> psycopg.Connection:
    """Open a connection; raises DatabaseUnavailable with the server named (never the password)."""
    options = f"-c search_path={schema}" if schema else None
    try:
        return psycopg.connect(
            libpq_url(url),
            autocommit=autocommit,
            connect_timeout=connect_timeout,
            options=options,
            application_name=application_name[:63],  # PostgreSQL's NAMEDATALEN
        )
    except psycopg.OperationalError as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        reason = lines[0] if lines else exc.__class__.__name__
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL at {describe_server(url)}: {reason}") from None


def _reset(conn: psycopg.Connection) -> None:
    """A connection back in the pool becomes a fresh session again: no cursor, SET, temporary table,
    advisory lock (a cabinet lock) or LISTEN of its last user survives; the search path and
    application name given at connect are the session's defaults and stay. (DISCARD ALL would also
    drop the statements psycopg prepared, which it would then go on using.)"""
    conn.autocommit = True
    conn.execute("CLOSE ALL; RESET ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES")
    conn.autocommit = False


class PooledConnection(psycopg.Connection):
    """A pool's connection that goes back to the pool at the end of its ``with`` block, as a plain
    connection closes there (psycopg leaves a pooled connection out after ``with conn:``)."""

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: Any) -> None:
        try:
            super().__exit__(exc_type, exc_val, exc_tb)
        finally:
            self.close()  # the pool's close_returns: back to the pool (a broken one is discarded)


class Pool:
    """Pooled warehouse connections of one process's work (a run): ``connect()`` hands out a
    connection whose ``close()`` (the end of its ``with`` block) returns it to the pool as a fresh
    session, so a sweep's cabinets stop paying PostgreSQL a new server process for every WB request
    and every page. The pool keeps at most ``size`` sessions (the PostgreSQL server's
    max_connections is shared by every run); when all of them are out, ``connect()`` opens a plain
    connection, closed at the end of its block, rather than wait. Each checkout is checked (a server
    restarted meanwhile costs a reconnect, not a failed statement); ``close()`` closes them all."""

    #: How long connect() waits for a pooled session (a new one being opened, or one coming back).
    WAIT_SECONDS = 0.2

    def __init__(self, url: str, schema: str | None, *, application_name: str, size: int):
        self._url, self._schema, self._application = url, schema, application_name
        kwargs: dict[str, object] = {"application_name": application_name[:63], "connect_timeout": 10}
        if schema:
            kwargs["options"] = f"-c search_path={schema}"
        self._pool = ConnectionPool(
            libpq_url(url),
            connection_class=PooledConnection,
            kwargs=kwargs,
            min_size=0,
            max_size=size,
            max_idle=60.0,
            timeout=self.WAIT_SECONDS,
            check=ConnectionPool.check_connection,
            reset=_reset,
            close_returns=True,
            open=True,
            name=f"{application_name}:{schema}",
        )
        self.overflow = 0

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        """A connection of the pool (``with pool.connect() as conn``: committed or rolled back, then returned)."""
        try:
            conn = self._pool.getconn()
        except PoolTimeout:  # every pooled session is out (or the server does not answer: connect() names it)
            self.overflow += 1
            return connect(self._url, self._schema, autocommit=autocommit, application_name=self._application)
        conn.autocommit = autocommit
        return conn

    def stats(self) -> dict[str, int]:
        """Sessions opened, checkouts served, plain connections opened past the pool."""
        got = self._pool.get_stats()
        return {
            "sessions": got.get("connections_num", 0),
            "checkouts": got.get("requests_num", 0),
            "overflow": self.overflow,
        }

    def close(self) -> None:
        self._pool.close()


@contextmanager
def transaction(url: str, schema: str) -> Iterator[psycopg.Connection]:
    """A connection inside one transaction: committed on success, rolled back on any error."""
    conn = connect(url, schema)
    try:
        with conn.transaction():
            yield conn
    finally:
        conn.close()
