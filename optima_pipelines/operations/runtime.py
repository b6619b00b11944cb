"""The prepared deployment: database resolved (embedded or external), schemas migrated, DAGSTER_HOME ready.

CLI commands open a Deployment and hand its environment to the Dagster processes they start
(webserver, daemon, code server, run workers), so every process sees the same database,
environment name and storage.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas, upgrade
from optima_pipelines.db.urls import dagster_storage_url, masked, parse_url, with_database
from optima_pipelines.settings import Settings, load_settings
from optima_pipelines.warehouse.secrets import TokenCipher, load_key

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the package: operations/ is one below it
EMBEDDED_DATABASE = "optima"


def project_file(name: str) -> Path:
    """dagster.yaml / workspace.yaml: the package's copy (kept identical to the top-level file by a test)."""
    return PACKAGE_DIR / "deploy" / name


@dataclass
class Deployment:
    settings: Settings
    database_url: str
    dagster_home: Path

    @property
    def schema(self) -> str:
        return self.settings.warehouse_schema

    @property
    def storage_url(self) -> str:
        return self.settings.dagster_storage_url or dagster_storage_url(self.database_url, self.settings.dagster_schema)

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        return connect(self.database_url, self.schema, autocommit=autocommit)

    def cipher(self) -> TokenCipher:
        return TokenCipher(load_key(self.settings))

    def masked_url(self) -> str:
        return masked(self.database_url)

    def child_env(self) -> dict[str, str]:
        """Environment for Dagster processes started on this deployment's behalf."""
        env = dict(os.environ)
        env.update(
            OPTIMA_DATABASE_URL=self.database_url,
            OPTIMA_ENV=self.settings.env,
            OPTIMA_STATE_DIR=str(self.settings.state_dir),
            OPTIMA_DAGSTER_STORAGE_URL=self.storage_url,
            DAGSTER_HOME=str(self.dagster_home),
        )
        return env

    def apply_env(self) -> None:
        """Make this process itself see the deployment (for in-process Dagster calls)."""
        os.environ.update({k: v for k, v in self.child_env().items() if k.startswith(("OPTIMA_", "DAGSTER_HOME"))})

    def upgrade_dagster_storage(self) -> None:
        """Create Dagster's run, event-log and schedule storage in its schema, or migrate it to the pinned
        Dagster's version, so that /metrics and the health check read it before any Dagster process ran."""
        from dagster import DagsterInstance

        self.apply_env()
        with DagsterInstance.get() as instance:  # dagster-postgres creates missing tables on open
            instance.upgrade(print_fn=lambda _message: None)


def prepare_dagster_home(settings: Settings) -> Path:
    home = settings.state_dir / "dagster" / settings.env
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    return home


def resolve_database_url(settings: Settings) -> str:
    if settings.database_url:
        parse_url(settings.database_url)  # fail early, with a clear message, on a malformed URL
        return settings.database_url
    from optima_pipelines.db.embedded import start_embedded

    server_url = start_embedded(settings.state_dir)
    with connect(server_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{EMBEDDED_DATABASE}"')
    return with_database(server_url, EMBEDDED_DATABASE)


@contextmanager
def open_deployment(settings: Settings | None = None, *, migrate: bool = True) -> Iterator[Deployment]:
    """Resolve the database (starting the embedded server if needed), migrate, prepare DAGSTER_HOME."""
    settings = settings or load_settings()
    url = resolve_database_url(settings)
    if migrate:
        upgrade(url, settings.warehouse_schema)
        ensure_schemas(url, settings.dagster_schema)
    home = prepare_dagster_home(settings)
    yield Deployment(settings=settings, database_url=url, dagster_home=home)
