"""PostgreSQL URL handling: one URL from the user, the right flavour for each library."""

from __future__ import annotations

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from optima_pipelines.errors import ConfigError


def parse_url(url: str) -> URL:
    """Parse a PostgreSQL URL; raises ConfigError naming the problem (never echoing a password)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(
            "OPTIMA_DATABASE_URL is not a valid URL (expected postgresql://user:password@host:port/db)"
        ) from None
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigError(f"OPTIMA_DATABASE_URL must be a postgresql:// URL, got scheme {parsed.drivername!r}")
    if not parsed.database:
        raise ConfigError("OPTIMA_DATABASE_URL names no database (add /dbname after the host)")
    return parsed


def libpq_url(url: str) -> str:
    """The URL as libpq/psycopg expect it: plain postgresql:// scheme."""
    return parse_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def sqlalchemy_url(url: str) -> str:
    """The URL for SQLAlchemy with psycopg 3 (used by Alembic)."""
    return parse_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def dagster_storage_url(url: str, schema: str) -> str:
    """The URL for dagster-postgres: psycopg2 scheme (DESIGN.md §4.2) and the storage schema on the search path."""
    parsed = parse_url(url)
    query = dict(parsed.query)
    query["options"] = f"-csearch_path={schema}"
    return parsed.set(drivername="postgresql+psycopg2", query=query).render_as_string(hide_password=False)


def with_database(url: str, database: str) -> str:
    return parse_url(url).set(database=database).render_as_string(hide_password=False)


def masked(url: str) -> str:
    """The URL with its password replaced by ***, safe to print."""
    try:
        return parse_url(url).render_as_string(hide_password=True)
    except ConfigError:
        return "<invalid URL>"


def describe_server(url: str) -> str:
    """host:port/db (or the socket folder) for error messages."""
    parsed = parse_url(url)
    host = parsed.host or parsed.query.get("host") or "localhost"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{host}{port}/{parsed.database}"
