"""The prepared deployment: database resolved (embedded or external), schemas migrated, DAGSTER_HOME ready.

CLI commands open a Deployment and hand its environment to the Dagster processes they start
(webserver, daemon, code server, run workers), so every process sees the same database,
environment name and storage.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import current_revision, ensure_schemas, head_revision, upgrade
from optima_pipelines.db.urls import dagster_storage_url, masked, parse_url, with_database
from optima_pipelines.errors import ConfigError
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


#: Beside DAGSTER_HOME's dagster.yaml: the SHA-256 of the packaged copy last written there, which tells
#: an edit of the file (kept) from an older packaged copy (replaced by the new one).
PACKAGED_STAMP = ".dagster.yaml.sha256"


#: A dagster.yaml larger than this is not anyone's edit: it is replaced by the packaged one.
_MAX_DAGSTER_YAML = 1 << 20


def _small_regular_file(path: Path) -> bytes | None:
    """The bytes of a regular file of at most ``_MAX_DAGSTER_YAML``; None for anything else (missing,
    a device, a FIFO, a symlink to one), which is never read."""
    try:
        if not path.is_file() or path.stat().st_size > _MAX_DAGSTER_YAML:
            return None
        return path.read_bytes()
    except OSError:
        return None


def prepare_dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME of the environment, with the packaged dagster.yaml, unless the one there was edited:
    an edited file is kept, and each command says so in one line (delete it to get the packaged one)."""
    home = settings.state_dir / "dagster" / settings.env
    home.mkdir(parents=True, exist_ok=True)
    target, stamp = home / "dagster.yaml", home / PACKAGED_STAMP
    packaged = project_file("dagster.yaml").read_bytes()
    current = _small_regular_file(target)
    if current is not None:
        written = (_small_regular_file(stamp) or b"").decode(errors="replace").strip() or None
        if current != packaged and hashlib.sha256(current).hexdigest() != written:
            print(
                f"note: keeping your edited {target} (it differs from the packaged dagster.yaml; "
                "delete it to use the packaged one)",
                file=sys.stderr,
            )
            return home
    if current != packaged:
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(packaged)
        tmp.replace(target)  # atomic: the processes of `dev` prepare it at the same time
    stamp.write_text(hashlib.sha256(packaged).hexdigest() + "\n")
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


_PROCESS_LOCK = threading.Lock()


def resolve_for_dagster_command() -> str:
    """Dagster's storage URL for a process of Dagster's own commands (``dagster dev``, ``dagster asset
    materialize``, ``dagster-webserver``, ``dagster-daemon run``, ``dg ...``), which read dagster.yaml
    but were not started by ``optima-pipelines``; called by the storage (orchestration/storage.py).

    ``OPTIMA_DAGSTER_STORAGE_URL`` set (every process ``optima-pipelines`` starts, or an operator's
    choice): that URL. Unset: the deployment is resolved here as ``open_deployment`` resolves it (the
    embedded server started, or attached to, when ``OPTIMA_DATABASE_URL`` is unset, and migrated), and
    this process's environment then names it, so that the resources (``EnvVar``) and every process
    Dagster starts from here (the webserver, the daemon, the code server, its runs) use the same
    deployment without resolving it again. DAGSTER_HOME is Dagster's choice and is left alone.

    Such processes start no run worker: unless ``OPTIMA_RUN_LAUNCHER`` says otherwise they launch runs
    with ``spawn`` (a run launched for warm workers that nobody started would never run).

    An external server is not migrated here (``optima-pipelines db upgrade`` does, once per release):
    a warehouse behind the code's migrations is a ConfigError naming that command."""
    with _PROCESS_LOCK:
        url = (os.environ.get("OPTIMA_DAGSTER_STORAGE_URL") or "").strip()
        if url:
            return url
        settings = load_settings()
        database_url = resolve_database_url(settings)
        if settings.embedded:
            upgrade(database_url, settings.warehouse_schema)
            ensure_schemas(database_url, settings.dagster_schema)
        elif current_revision(database_url, settings.warehouse_schema) != head_revision():
            raise ConfigError(
                f"the warehouse {settings.warehouse_schema} on {masked(database_url)} is not at this code's "
                "migration: run `optima-pipelines db upgrade`"
            )
        storage = dagster_storage_url(database_url, settings.dagster_schema)
        os.environ.update(
            OPTIMA_DATABASE_URL=database_url,
            OPTIMA_ENV=settings.env,
            OPTIMA_STATE_DIR=str(settings.state_dir),
            OPTIMA_DAGSTER_STORAGE_URL=storage,
        )
        if not (os.environ.get("OPTIMA_RUN_LAUNCHER") or "").strip():
            os.environ["OPTIMA_RUN_LAUNCHER"] = "spawn"
        os.environ.update(serve_demo_wb(settings))
        return storage


def demo_setup(settings: Settings):  # type: ignore[no-untyped-def]
    """The simulated WB a demo (`optima-pipelines demo`) loaded its cabinets from, unless the deployment
    is pointed at a WB of its own (OPTIMA_WB_BASE_URL) or the simulator is not installed."""
    if settings.wb_base_url:
        return None
    try:
        from wb_simulator.demo import SimSetup
    except ImportError:  # an installation without the simulator package
        return None
    return SimSetup.load(settings.state_dir)


#: The demo's simulated WB this process serves (for as long as it lives), once started.
_DEMO_WB: list[object] = []


def serve_demo_wb(settings: Settings) -> dict[str, str]:
    """After a demo, with no WB configured: the demo's simulated WB served by this process in a thread
    for as long as it lives, as `optima-pipelines dagster` and `dev` serve it, so that the demo's
    cabinets keep syncing; the variables that point the deployment at it (none without a demo)."""
    setup = demo_setup(settings)
    if setup is None:
        return {}
    from wb_simulator.server import serve

    sim, _tokens = setup.build()
    server = serve(sim)
    base_url = server.__enter__()
    _DEMO_WB.append(server)  # never left: the thread is a daemon and ends with the process
    return {"OPTIMA_WB_BASE_URL": base_url, "OPTIMA_WB_TIME_SCALE": str(setup.time_scale)}
