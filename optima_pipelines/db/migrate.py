"""Schema creation and versioned migrations (Alembic) for one environment."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.urls import sqlalchemy_url

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Serialises concurrent upgrades (CLI, tests, code servers) on one server: a fixed advisory-lock key.
_MIGRATION_LOCK_KEY = 0x0F71_3A00


def ensure_schemas(url: str, *schemas: str) -> None:
    with connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))


def alembic_config(url: str, schema: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Alembic's ini interpolation treats % specially.
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["schema"] = schema
    return cfg


def upgrade(url: str, schema: str, revision: str = "head") -> None:
    """Create the schema if needed and apply every pending migration, holding a server-wide lock."""
    ensure_schemas(url, schema)
    with connect(url, autocommit=True) as lock_conn:
        lock_conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK_KEY,))
        try:
            command.upgrade(alembic_config(url, schema), revision)
        finally:
            lock_conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK_KEY,))


def current_revision(url: str, schema: str) -> str | None:
    import sqlalchemy as sa

    engine = sa.create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"version_table_schema": schema})
            return ctx.get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head
