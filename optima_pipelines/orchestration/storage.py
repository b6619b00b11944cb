"""Dagster's storage for this deployment (dagster.yaml ``storage: custom``): dagster-postgres's, with
the connections of a process pooled.

dagster-postgres opens a PostgreSQL session for every statement of its run, event-log and schedule
storage (a ``NullPool``, so that no process holds connections per ``DagsterInstance``), and inspects
the server's tables whenever an instance is created: the code server creates one for every sensor
tick, a run for its run. At 1,000 cabinets that was 120 sessions a second, each a new server process
on PostgreSQL's side, once the warehouse's own connections were pooled (bench/scale.py, issue 17).
Here every instance of a process shares one pooled engine per storage URL (``pool_pre_ping``: a
session that died with a server restart is replaced, not failed), and the tables are looked for
(and created when missing) by the process's first instance only. The webserver still swaps in its
own pooled engine (``optimize_for_webserver``), as with dagster-postgres.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config
from sqlalchemy import Engine, create_engine

from optima_pipelines.orchestration.dagster_internals import (
    ConfigurableClassData,
    remember_schema_probes,
    share_storage_engine,
    store_check_evaluations_in_batches,
    store_planned_checks_per_partition,
    store_planned_events_in_batches,
)

#: Sessions each process keeps for Dagster's storage, and how many more it may open at once (closed
#: when returned). A run writes its events from one thread; the daemon's threads (sensors,
#: schedules, the queue, monitoring) are the most concurrent users. PostgreSQL's max_connections is
#: shared by every process of the deployment: each keeps one.
POOL_SIZE = 1
MAX_OVERFLOW = 10

#: Engines a process keeps (one per storage URL it uses: one in a deployment's processes; the test
#: suite's process meets a URL per test): past this the oldest is disposed (its idle sessions closed).
MAX_ENGINES = 4

_ENGINES: OrderedDict[tuple[int, str], Engine] = OrderedDict()
_CHECKED: set[tuple[int, str]] = set()
_LOCK = threading.Lock()


def shared_engine(postgres_url: str) -> Engine:
    """This process's pooled engine for ``postgres_url``. Keyed by process id too: a forked child (a
    Celery prefork run worker) opens its own sessions and never touches, nor closes, its parent's."""
    key = (os.getpid(), postgres_url)
    with _LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = create_engine(
                postgres_url,
                isolation_level="AUTOCOMMIT",  # as dagster-postgres's own engines
                pool_size=POOL_SIZE,
                max_overflow=MAX_OVERFLOW,
                pool_pre_ping=True,
                pool_recycle=3600,
            )
            _ENGINES[key] = engine
            while len(_ENGINES) > MAX_ENGINES:
                _, oldest = _ENGINES.popitem(last=False)
                oldest.dispose()
        _ENGINES.move_to_end(key)
        return engine


def deployment_storage_url() -> str:
    """The deployment's storage URL (``ops.runtime.resolve_for_dagster_command``: the environment's, or
    resolved here, starting the embedded server when no database is configured).

    What keeps a plain Dagster command from working (a malformed URL, a server that does not answer,
    a warehouse behind the code's migrations) ends the command with one line naming it, instead of
    Dagster's traceback of the instance's construction: this runs where a command builds its instance,
    before anything else."""
    import psycopg

    from optima_pipelines.errors import OptimaError
    from optima_pipelines.operations.runtime import resolve_for_dagster_command

    try:
        return resolve_for_dagster_command()
    except OptimaError as exc:
        raise SystemExit(f"error: {exc}") from None
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise SystemExit(f"error: database: {first}") from None


class OptimaPostgresStorage(DagsterPostgresStorage):
    """``DagsterPostgresStorage`` whose parts share the process's pooled engine (module docstring)."""

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: ConfigurableClassData | None = None,
        token_provider: Any = None,
    ):
        key = (os.getpid(), postgres_url)
        super().__init__(
            postgres_url,
            should_autocreate_tables=should_autocreate_tables and key not in _CHECKED,
            inst_data=inst_data,
            token_provider=token_provider,
        )
        _CHECKED.add(key)
        if token_provider is None:  # a token-authenticated server keeps dagster-postgres's own engines
            share_storage_engine(self, shared_engine(postgres_url))
        # A run's planned materializations, one per asset and partition, in one INSERT a batch.
        store_planned_events_in_batches(self)
        # Whether a table of a Dagster migration exists, asked of PostgreSQL until the answer is yes.
        remember_schema_probes(self, postgres_url)
        # A ranged run's planned asset checks: each partition's row holds that partition's event.
        store_planned_checks_per_partition(self)
        # A run's partitioned check evaluations (the mart's, three per cabinet and day): one INSERT a batch.
        store_check_evaluations_in_batches(self)
        # Dagster's one-off commands (`dagster asset materialize`, `dg launch`): one-line errors, and
        # the runs they executed (operations/dagster_cli.py).
        from optima_pipelines.operations import dagster_cli

        dagster_cli.install(self)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> OptimaPostgresStorage:
        if config_value.get("postgres_url") or config_value.get("postgres_db"):
            url = pg_url_from_config(config_value)
        else:  # dagster.yaml's way: the deployment's storage, whoever started this process
            url = deployment_storage_url()
        return cls(
            inst_data=inst_data,
            postgres_url=url,
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )
