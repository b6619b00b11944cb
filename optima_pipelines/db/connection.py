"""Connections to the warehouse: psycopg 3, with the environment's schema as the search path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from optima_pipelines.db.urls import describe_server, libpq_url
from optima_pipelines.errors import DatabaseUnavailable

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


@contextmanager
def transaction(url: str, schema: str) -> Iterator[psycopg.Connection]:
    """A connection inside one transaction: committed on success, rolled back on any error."""
    conn = connect(url, schema)
    try:
        with conn.transaction():
            yield conn
    finally:
        conn.close()
