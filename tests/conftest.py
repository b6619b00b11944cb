"""Shared fixtures: a real PostgreSQL database per test session, a fresh environment per test.

The server is the one named by OPTIMA_TEST_DATABASE_URL (CI points it at the system PostgreSQL);
unset, an embedded server is started in a temporary folder. The session's database is created
with a unique name and dropped at the end.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from cryptography.fernet import Fernet
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import alembic_config, ensure_schemas
from optima_pipelines.db.urls import dagster_storage_url, libpq_url, with_database
from optima_pipelines.settings import load_settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "system: runs the real Dagster daemon/webserver as processes")
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        # The controller names the run, so that its scheduler finds what the workers wrote.
        config.option.testrunuid = config.option.testrunuid or uuid.uuid4().hex


#: Seeds the disorder suite runs by default (the CI suite's share of the time budget).
DISORDER_SEEDS = 5


def _own_server_url() -> str:
    """OPTIMA_TEST_DATABASE_URL, or "" for the embedded default."""
    return os.environ.get("OPTIMA_TEST_DATABASE_URL", "").strip()


#: PostgreSQL sessions one pytest worker may hold at its peak: a worker runs up to two whole shared
#: deployments at once (tests/system/conftest.py: warm and spawn; daemon, webserver, code server, run
#: workers, each pooling its own sessions; 54 measured for two deployments), next to the test's own
#: connections.
SESSIONS_PER_WORKER = 80


def pytest_sessionstart(session: pytest.Session) -> None:
    """On a server of one's own (OPTIMA_TEST_DATABASE_URL), the workers share its max_connections:
    too few, and system tests fail midway with "too many clients"; say so before any test runs.
    The embedded default is a server per worker and needs no check."""
    config = session.config
    url = _own_server_url()
    if not url or hasattr(config, "workerinput"):  # checked once, by the controller
        return
    workers = getattr(config.option, "numprocesses", None) or 1
    workers = workers if isinstance(workers, int) else os.cpu_count() or 1
    need = workers * SESSIONS_PER_WORKER
    with connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
        ).fetchone()
    allowed = row[0] if row else 0
    if allowed < need:
        raise pytest.UsageError(
            f"the server of OPTIMA_TEST_DATABASE_URL allows {allowed} sessions (max_connections less the "
            f"superuser's reserve); {workers} pytest workers need {need} ({SESSIONS_PER_WORKER} each): raise "
            f"max_connections (ALTER SYSTEM SET max_connections = {need + 50}, then restart the server), "
            "or run fewer workers (pytest -n 1)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The system tests first: they are the longest, and the two workers then end together. The tests
    of one shared deployment (tests/system/conftest.py) together, in one group: those marked ``late``
    after the others, those that stop their deployment last, each deployment's one after another;
    groups before the other system files. Of the others, the files marked ``long`` first: a worker
    that took one last would end alone, the other cores idle.
    Under pytest-xdist a worker writes each grouped test's group for the controller's scheduler."""
    from tests.system.conftest import CONFIGURATIONS, deployments_of, group_of

    order = {item: i for i, item in enumerate(items)}
    group = {item: group_of(item) for item in items}
    ranks: dict[str, int] = {}
    for item in items:
        if group[item]:
            ranks.setdefault(group[item], len(ranks))

    names = list(CONFIGURATIONS)

    def key(item: pytest.Item) -> tuple[bool, bool, int, int, int, int]:
        late = item.get_closest_marker("late") is not None
        stops = item.get_closest_marker("stops_deployment") is not None
        used = deployments_of(item)
        return (
            item.path.parent.name != "system",
            item.get_closest_marker("long") is None,
            ranks.get(group[item] or "", len(ranks)),
            late + 2 * stops,
            names.index(used[0]) if used else 0,  # a deployment's tests one after another
            order[item],
        )

    items.sort(key=key)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        path = _groups_file(workerinput["testrunuid"])
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({item.nodeid: group[item] for item in items if group[item]}))
        tmp.replace(path)  # every worker writes the same: whole files only


def _groups_file(testrunuid: str) -> Path:
    """Where the workers tell the controller which tests share a deployment (by the run's id)."""
    return Path(tempfile.gettempdir()) / f"optima-test-groups-{testrunuid}.json"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, except that the tests of one shared deployment (tests/system/conftest.py)
    go to one worker as one unit, whatever their files: the deployment then starts once."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    path = _groups_file(config.option.testrunuid)

    class GroupOrFileScheduling(LoadFileScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (schedule() comes after)
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return GroupOrFileScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and getattr(config.option, "testrunuid", None):
        _groups_file(config.option.testrunuid).unlink(missing_ok=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seeds",
        type=int,
        default=DISORDER_SEEDS,
        help=f"how many seeds the disorder suite runs (seeds 1..N; default {DISORDER_SEEDS}): "
        "pytest -k disorder --seeds 50",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``disorder_seed``: one test per seed, 1..--seeds (ids ``seed1``… so ``-k seed7`` picks one)."""
    if "disorder_seed" in metafunc.fixturenames:
        seeds = metafunc.config.getoption("seeds")
        if seeds < 1:
            raise pytest.UsageError(f"--seeds must be at least 1, got {seeds}")
        metafunc.parametrize("disorder_seed", range(1, seeds + 1), ids=lambda s: f"seed{s}")


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A libpq URL of a PostgreSQL server (any database on it)."""
    url = _own_server_url()
    if url:
        yield url
        return
    from optima_pipelines.db.embedded import start_embedded

    folder = Path(tempfile.mkdtemp(prefix="optima-test-pg-"))
    yield start_embedded(folder)
    # The embedded server stops when this process exits (its atexit handler); the folder goes after.
    import atexit

    atexit.register(shutil.rmtree, folder, True)


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A database of our own on the test server, dropped after the session."""
    name = f"optima_test_{uuid.uuid4().hex[:10]}"
    with connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield with_database(server_url, name)
    with connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def secret_key() -> str:
    return Fernet.generate_key().decode()


#: The shortest retention the deployment allows: the РНП tables get 7 monthly partitions each instead
#: of 28 (the 90 days WB keeps still fit), which makes a test's schema 3 times cheaper to create and drop.
TEST_RETENTION_MONTHS = "3"
#: The schema name the migration script is written for; each test's copy replaces it with its own.
_SCRIPT_SCHEMA = "optima_schema_template"


@pytest.fixture(scope="session")
def migration_script() -> str:
    """Every migration as one SQL script (Alembic's offline mode), written once for the session.

    Each test's schema is then one round trip of DDL, without an Alembic run of its own;
    tests/db/test_migrations.py checks that it builds exactly the schema `upgrade` builds.
    """
    buffer = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", TEST_RETENTION_MONTHS)
        config = alembic_config("postgresql://offline/optima", _SCRIPT_SCHEMA)  # no connection is made
        config.output_buffer = buffer
        command.upgrade(config, "head", sql=True)
    return buffer.getvalue()


def drop_schemas(url: str, *schemas: str) -> None:
    """Drop these schemas and everything in them (those that exist)."""
    with connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def migrate_by_script(url: str, schema: str, script: str) -> None:
    ensure_schemas(url, schema)
    with connect(url, autocommit=True) as conn:
        conn.execute(script.replace(_SCRIPT_SCHEMA, schema))


#: What a schema is made of, independent of its name: its relations, columns, constraints, functions,
#: triggers and grants. A test that changed any of it (a partition added or dropped, a column
#: altered) leaves a schema that is dropped, not recycled.
_SHAPE = """
SELECT md5(string_agg(d, E'\n' ORDER BY d)) FROM (
  SELECT format('rel %%s %%s %%s %%s', c.relname, c.relkind, c.relispartition, c.relacl) AS d
    FROM pg_class c WHERE c.relnamespace = %(ns)s::regnamespace
  UNION ALL
  SELECT format('att %%s %%s %%s %%s %%s', c.relname, a.attname, a.atttypid, a.attnotnull, a.atthasdef)
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
   WHERE c.relnamespace = %(ns)s::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT format('con %%s %%s %%s', c.relname, k.conname, k.contype) FROM pg_constraint k
    LEFT JOIN pg_class c ON c.oid = k.conrelid WHERE k.connamespace = %(ns)s::regnamespace
  UNION ALL
  SELECT format('fn %%s %%s %%s', p.proname, md5(p.prosrc), p.proconfig) FROM pg_proc p
   WHERE p.pronamespace = %(ns)s::regnamespace
  UNION ALL
  SELECT format('trg %%s %%s %%s', c.relname, t.tgname, t.tgenabled) FROM pg_trigger t
    JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal
  UNION ALL
  SELECT format('nsp %%s', nspacl) FROM pg_namespace WHERE oid = %(ns)s::regnamespace
) s
"""


class RecycledSchemas:
    """Schemas of this worker's finished tests, emptied, for the next test to take under its own name:
    the warehouse's (``optima_<env>``) and Dagster's storage (``dagster_<env>``), a pool of each.

    Creating a migrated warehouse schema (77 tables, 205 relations) and dropping it cost PostgreSQL
    about 0.35 CPU-s a test, Dagster's storage 0.15 more: a tenth of the suite's CPU. After a test,
    its schema is emptied instead (TRUNCATE of the tables that hold or held rows, the rows its
    creation wrote put back, sequences set back) and the next test renames it to its own name: the
    same schema a fresh one is, for a few milliseconds. A schema whose shape (``_SHAPE``) differs
    from a fresh one's, or that cannot be emptied at once (a session of the test still holds a lock),
    is dropped as before.
    """

    def __init__(self) -> None:
        self.free: list[str] = []
        self.shape: str | None = None
        #: The rows the schema's creation writes (alembic_version, singletons, Dagster's migration
        #: marks), as COPY text, by table; and where it left each sequence (None: never drawn from).
        self.seeds: dict[str, bytes] = {}
        self.sequences: dict[str, int | None] = {}

    def take(self, url: str, schema: str, create: Callable[[], None]) -> None:
        """``schema``: a recycled one renamed (in place of an empty one of that name), or ``create()``d."""
        with connect(url, autocommit=True) as conn:
            while self.free:
                old = self.free.pop()
                try:
                    with conn.transaction():
                        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {}").format(sql.Identifier(schema)))
                        conn.execute(
                            sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(schema))
                        )
                    return
                except psycopg.Error:
                    continue  # gone (dropped by the test): the next one, or a new one
        create()
        if self.shape is None:
            with connect(url, autocommit=True) as conn:
                self._learn(conn, schema)

    def _learn(self, conn: psycopg.Connection, schema: str) -> None:
        """What a fresh schema is: its shape, the rows its creation wrote, its sequences."""
        for table in self._written(conn, schema):
            with conn.cursor().copy(
                sql.SQL("COPY {}.{} TO STDOUT").format(sql.Identifier(schema), sql.Identifier(table))
            ) as copy:
                self.seeds[table] = b"".join(bytes(chunk) for chunk in copy)
        self.sequences = dict(self._sequences(conn, schema))
        self.shape = self._shape(conn, schema)

    @staticmethod
    def _shape(conn: psycopg.Connection, schema: str) -> str:
        row = conn.execute(_SHAPE, {"ns": schema}).fetchone()
        return str(row[0]) if row else ""

    @staticmethod
    def _written(conn: psycopg.Connection, schema: str) -> list[str]:
        """The tables that ever held a row: a fresh table has no page yet (TRUNCATE leaves none either)."""
        return [
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r' "
                "AND pg_relation_size(oid) > 0",
                (schema,),
            )
        ]

    @staticmethod
    def _sequences(conn: psycopg.Connection, schema: str) -> list[tuple[str, int | None]]:
        return conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = %s", (schema,)
        ).fetchall()

    def give(self, conn: psycopg.Connection, schema: str) -> bool:
        """Empty the finished test's schema for the next test; False if it must be dropped instead."""
        if self.shape is None:
            return False
        try:
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '2s'")
                # The schema's own triggers (the РНП watermarks' AFTER TRUNCATE) stay silent: nothing
                # of the emptying is recorded in it.
                conn.execute("SET LOCAL session_replication_role = replica")
                if self._shape(conn, schema) != self.shape:
                    return False
                tables = sorted(set(self._written(conn, schema)) | set(self.seeds))
                names = sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
                conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))
                for table, rows in self.seeds.items():
                    target = sql.SQL("COPY {}.{} FROM STDIN").format(sql.Identifier(schema), sql.Identifier(table))
                    with conn.cursor().copy(target) as copy:
                        copy.write(rows)
                # Sequences where the creation left them: those of tables the test emptied itself
                # (DELETE) or only drew from were not restarted above, those of the seeds were.
                for sequence, value in self._sequences(conn, schema):
                    fresh = self.sequences.get(sequence)
                    if value == fresh:
                        continue
                    name = sql.Identifier(schema, sequence)
                    if fresh is None:
                        conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(name))
                    else:
                        conn.execute("SELECT setval(%s::regclass, %s)", (name.as_string(conn), fresh))
        except psycopg.Error:
            return False
        self.free.append(schema)
        return True


#: This worker's recycled schemas: the warehouse's and Dagster's storage.
_RECYCLED = RecycledSchemas()
_RECYCLED_DAGSTER = RecycledSchemas()


@pytest.fixture
def optima_env(
    database_url: str, secret_key: str, migration_script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A fresh, migrated OPTIMA_ENV of its own for one test, with the process environment pointing at it
    (its warehouse schema an earlier test's, emptied and renamed, when there is one: ``RecycledSchemas``)."""
    env = f"t{secrets.token_hex(5)}"
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("OPTIMA_DATABASE_URL", database_url)
    monkeypatch.setenv("OPTIMA_ENV", env)
    monkeypatch.setenv("OPTIMA_STATE_DIR", str(state))
    monkeypatch.setenv("OPTIMA_SECRET_KEY", secret_key)
    monkeypatch.setenv("OPTIMA_UPLOAD_DIR", str(tmp_path))  # where the tests write the reports they import
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", TEST_RETENTION_MONTHS)
    # The in-process tests tick the re-aggregation sensor back to back (its pacing has a test of its own).
    monkeypatch.setenv("OPTIMA_REAGGREGATE_EVERY_SECONDS", "0")
    monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", dagster_storage_url(database_url, f"dagster_{env}"))
    _RECYCLED.take(
        database_url, f"optima_{env}", lambda: migrate_by_script(database_url, f"optima_{env}", migration_script)
    )
    ensure_schemas(database_url, f"dagster_{env}")
    yield env
    with connect(database_url, autocommit=True) as conn:
        for pool, schema in ((_RECYCLED_DAGSTER, f"dagster_{env}"), (_RECYCLED, f"optima_{env}")):
            if not pool.give(conn, schema):  # an empty dagster_<env> (no Dagster in the test) is dropped
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def scratch_schema(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A warehouse schema of its own, not migrated, dropped after the test: for a test that migrates
    step by step (``upgrade(database_url, scratch_schema, revision)``)."""
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", TEST_RETENTION_MONTHS)
    schema = f"optima_m{secrets.token_hex(4)}"
    yield schema
    drop_schemas(database_url, schema)


@pytest.fixture
def warehouse_conn(optima_env: str, database_url: str) -> Iterator[psycopg.Connection]:
    """A connection to the test environment's warehouse schema (autocommit)."""
    with connect(database_url, f"optima_{optima_env}", autocommit=True) as conn:
        yield conn


@pytest.fixture
def settings(optima_env: str):
    return load_settings()


@pytest.fixture(scope="session")
def dagster_storage_script(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any]]:
    """The statements Dagster runs to create its storage in an empty schema (tables, its Alembic stamp,
    its data-migration marks), recorded once for the session as Dagster itself sends them.

    Replayed into each test's dagster_<env>, the test's instance starts on a ready schema in 0.05 s
    instead of creating it in 0.7 s; the statements are Dagster's own, so nothing of ours can drift
    from what the pinned Dagster creates.
    """
    import sqlalchemy as sa
    from dagster import DagsterInstance

    from optima_pipelines.operations.runtime import project_file

    schema = f"dagster_script_{secrets.token_hex(4)}"
    ensure_schemas(database_url, schema)
    home = tmp_path_factory.mktemp("dagster_script_home")
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    statements: list[tuple[str, Any]] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if not statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, parameters))

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DAGSTER_HOME", str(home))
            mp.setenv("OPTIMA_DAGSTER_STORAGE_URL", dagster_storage_url(database_url, schema))
            with DagsterInstance.get() as instance:
                instance.get_runs(limit=1)
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
        drop_schemas(database_url, schema)
    assert any(s.lstrip().startswith("CREATE TABLE runs") for s, _ in statements), "Dagster created no storage"
    return statements


def replay_dagster_storage(url: str, schema: str, statements: list[tuple[str, Any]]) -> None:
    """Dagster's storage in ``schema`` (empty), by ``dagster_storage_script``'s statements."""
    import psycopg2

    # Dagster's storage speaks psycopg2: its statements are replayed through it, parameters and all.
    raw = psycopg2.connect(libpq_url(url))
    try:
        raw.autocommit = True
        with raw.cursor() as cursor:
            cursor.execute(f'SET search_path TO "{schema}"')
            for statement, parameters in statements:
                cursor.execute(statement, parameters)
    finally:
        raw.close()


@pytest.fixture
def dagster_instance(
    optima_env: str, database_url: str, dagster_storage_script: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A Dagster instance configured by the project's dagster.yaml, storing in dagster_<env>."""
    from dagster import DagsterInstance

    from optima_pipelines.operations.runtime import project_file

    schema = f"dagster_{optima_env}"
    _RECYCLED_DAGSTER.take(
        database_url, schema, lambda: replay_dagster_storage(database_url, schema, dagster_storage_script)
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:
        yield instance
