"""The warehouse resource: connections to this environment's schema on the PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from optima_pipelines.db.connection import APPLICATION_NAME, Pool, connect
from optima_pipelines.settings import load_settings
from optima_pipelines.warehouse.secrets import TokenCipher, load_key


class Warehouse(ConfigurableResource):
    """PostgreSQL warehouse of one environment (schema ``optima_<env>``).

    ``database_url`` is bound to the OPTIMA_DATABASE_URL environment variable in definitions.py,
    so it is read at run time and never shown in run config.
    """

    database_url: str
    #: The environment (OPTIMA_ENV) whose schema to use; None reads it from the environment at run time.
    env: str | None = None
    #: pg_stat_activity's application_name: the run's job, so that an operator (and bench/scale.py)
    #: sees which job holds a connection and what its queries cost.
    _application: str = PrivateAttr(default=APPLICATION_NAME)
    #: A run's connections come from a pool of its own (closed when the run's execution ends): a
    #: sweep's cabinets would otherwise open a PostgreSQL session for every WB request and page.
    #: Outside a run (sensors, the CLI) each connect() opens a connection of its own.
    _pool: Pool | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if context.dagster_run is not None:
            self._application = f"{APPLICATION_NAME}/{context.dagster_run.job_name}"
            # Each of a sweep's threads holds its cabinet's lock, a page's connection and now and then
            # one more; past this the pool's wait names the cause rather than exhausting the server.
            size = load_settings().sweep_threads * 3 + 4
            self._pool = Pool(self.database_url, self.schema_name, application_name=self._application, max_size=size)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()

    @property
    def schema_name(self) -> str:
        return f"optima_{self.env or load_settings().env}"

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        if self._pool is not None:
            return self._pool.connect(autocommit=autocommit)
        return connect(self.database_url, self.schema_name, autocommit=autocommit, application_name=self._application)

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One transaction: everything inside commits together or not at all."""
        with self.connect() as conn:
            with conn.transaction():
                yield conn

    def cipher(self) -> TokenCipher:
        return TokenCipher(load_key(load_settings(), create=False))
