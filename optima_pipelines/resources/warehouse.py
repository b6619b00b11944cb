"""The warehouse resource: connections to this environment's schema on the PostgreSQL server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from optima_pipelines.db.connection import APPLICATION_NAME, Pool, connect
from optima_pipelines.logs import get_logger
from optima_pipelines.settings import load_settings
from optima_pipelines.warehouse.secrets import TokenCipher, load_key

_POOLS: dict[tuple[str, str, str], tuple[Pool, int]] = {}
_POOLS_LOCK = threading.Lock()
log = get_logger(__name__)


def shared_pool(url: str, schema: str, application: str) -> Pool:
    """The process's pool for (server, schema, job), opened by its first user: a run's warehouse
    and the WB resource's (its rate limits) share one. Sized for a sweep: each of its
    OPTIMA_SWEEP_THREADS cabinets holds a page's session (now and then one more, a plain connection
    past the pool's size); their locks share one session (warehouse/cabinet_lock.py ``LockSession``)."""
    key = (url, schema, application)
    with _POOLS_LOCK:
        pool, users = _POOLS.get(key) or (None, 0)
        if pool is None:
            pool = Pool(url, schema, application_name=application, size=load_settings().sweep_threads + 2)
        _POOLS[key] = (pool, users + 1)
        return pool


def release_pool(pool: Pool) -> None:
    """One user less; the last closes the pool (its sessions end) and logs what it served."""
    with _POOLS_LOCK:
        key = next((k for k, (p, _) in _POOLS.items() if p is pool), None)
        if key is None:
            return
        _, users = _POOLS[key]
        if users > 1:
            _POOLS[key] = (pool, users - 1)
            return
        del _POOLS[key]
    stats = pool.stats()
    pool.close()
    log.info(
        f"warehouse connections: {stats['checkouts']} served by {stats['sessions']} sessions "
        f"(and {stats['overflow']} plain connections past the pool)"
    )


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
    #: A run's connections come from the process's pool for the run (db/connection.py ``Pool``,
    #: shared with the WB resource's warehouse, closed when the run's execution ends): a sweep's
    #: cabinets would otherwise open a PostgreSQL session for every WB request and page. Outside a
    #: run (sensors, the CLI) each connect() opens a connection of its own.
    _pool: Pool | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if context.dagster_run is not None:
            self._application = f"{APPLICATION_NAME}/{context.dagster_run.job_name}"
            self._pool = shared_pool(self.database_url, self.schema_name, self._application)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            release_pool(pool)

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
