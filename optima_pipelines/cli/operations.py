"""`optima-pipelines serve ...`, `metrics` and `health`: the deployment's processes and its checks.

``serve code-server``, ``serve daemon`` and ``serve webserver`` are the processes that ``dev``
supervises and that production runs as separate services (deploy/: systemd units, Procfile,
Kubernetes). None of them migrates: ``optima-pipelines db upgrade`` does, once per release.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from optima_pipelines.errors import ConfigError, DatabaseUnavailable
from optima_pipelines.operations import processes
from optima_pipelines.operations.daemon import refuse_if_running
from optima_pipelines.operations.daemon import run as run_daemon
from optima_pipelines.operations.runtime import Deployment, open_deployment
from optima_pipelines.settings import run_launcher_choice

CODE_SERVER_DEFAULT = f"{processes.CODE_SERVER_HOST}:{processes.CODE_SERVER_PORT}"
METRICS_PORT_DEFAULT = 9464


def auth_banner(user: str | None, password: str | None) -> str:
    """One line saying whether the UI asks for a login; raises ConfigError when half-configured."""
    from optima_pipelines.operations.webserver import Credentials

    credentials = Credentials.from_settings(user, password)
    if credentials is None:
        return "WARNING: the Dagster UI runs WITHOUT authentication: set OPTIMA_UI_USER and OPTIMA_UI_PASSWORD"
    return f"basic auth on, user {credentials.user!r}"


@click.group(name="serve")
def serve_group() -> None:
    """The deployment's long-running processes, one per command (production runs each as a service)."""


@serve_group.command("code-server")
@click.option("-m", "--module", default=processes.DEFINITIONS_MODULE, show_default=True, help="Definitions module.")
@click.option("--location-name", default=processes.LOCATION_NAME, show_default=True)
@click.option("--host", default=processes.CODE_SERVER_HOST, show_default=True)
@click.option("--port", default=processes.CODE_SERVER_PORT, show_default=True, type=int)
def code_server_cmd(module: str, location_name: str, host: str, port: int) -> None:
    """Dagster's code server (gRPC) for the code location: the daemon and the UI load definitions from it."""
    with open_deployment(migrate=False) as dep:
        forkserver = os.environ.get("OPTIMA_CODE_SERVER_FORKSERVER", "") == "1"
        argv = processes.code_server_argv(module, location_name, host, port, forkserver=forkserver)
        sys.exit(processes.run_child(argv, dep.child_env()))


@serve_group.command("daemon")
@click.option("--code-server", default=CODE_SERVER_DEFAULT, show_default=True, help="HOST:PORT of the code server.")
@click.option("--wait", default=300, show_default=True, type=int, help="Seconds to wait for the code server.")
def daemon_cmd(code_server: str, wait: int) -> None:
    """dagster-daemon: schedules, sensors, the run queue, run monitoring and backfills."""
    host, port = processes.parse_address(code_server)
    with open_deployment(migrate=False) as dep:
        refuse_if_running(dep.storage_url)  # one daemon per storage: say so now, not after the wait
        env = dep.child_env()
        workspace = processes.write_grpc_workspace(dep.dagster_home, host, port)
        if run_launcher_choice(env) == "celery":
            from optima_pipelines.orchestration.run_launcher import prepare_broker

            prepare_broker(env)
        processes.wait_for_code_server(host, port, wait)
        dep.apply_env()
        run_daemon(workspace)


@serve_group.command("run-worker")
@click.option(
    "-m",
    "--module",
    default=processes.DEFINITIONS_MODULE,
    show_default=True,
    help="Definitions module imported at start.",
)
@click.option(
    "-c", "--concurrency", default=processes.RUN_WORKER_CONCURRENCY, show_default=True, type=int, help="Runs at once."
)
@click.option(
    "--name",
    default="optima",
    show_default=True,
    help="Worker name, unique per host: NAME (then NAME@<this host>) or NAME@HOST.",
)
def run_worker_cmd(module: str, concurrency: int, name: str) -> None:
    """Warm run workers (the default OPTIMA_RUN_LAUNCHER=celery): execute runs taken from the broker in processes
    that imported Dagster and the definitions once. Run as many as you like, on any host that reaches
    the database and the broker."""
    from optima_pipelines.orchestration.run_launcher import prepare_broker

    with open_deployment(migrate=False) as dep:
        env = {**dep.child_env(), "OPTIMA_RUN_WORKER_PRELOAD": module}
        run_worker_ready(dep, env)
        prepare_broker(env)
        # Stopped, the worker ends its runs now (Celery's cold shutdown): they are re-queued by
        # dagster.yaml's run_retries, as when its host dies. A warm shutdown would wait for them.
        # Billiard's pool can hang its parent's shutdown on the pool's queue lock (seen once in a
        # whole-suite run): what is left after RUN_WORKER_STOP_SECONDS is killed.
        argv = processes.run_worker_argv(concurrency, name)
        code = processes.run_child(
            argv, env, stop_signal=signal.SIGQUIT, stop_timeout=processes.RUN_WORKER_STOP_SECONDS
        )
        sys.exit(code)


def run_worker_ready(dep: Deployment, env: dict[str, str]) -> None:
    """A run worker takes runs only if it can execute them: the database answers and is migrated, the
    token key is there and reads the cabinets' tokens, the broker answers. Raises ConfigError, one
    line naming what is missing (a worker without the key would take runs that then all fail)."""
    from optima_pipelines.db.migrate import current_revision, head_revision
    from optima_pipelines.operations.workers import broker_reachable
    from optima_pipelines.warehouse.cabinets import get_token
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key

    def refuse(what: str) -> ConfigError:
        return ConfigError(f"the run worker does not start: {what}")

    try:
        with dep.connect() as conn:
            conn.execute("SELECT 1")
            current, head = current_revision(dep.database_url, dep.schema), head_revision()
            if current != head:
                raise refuse(f"schema {dep.schema} is at migration {current}, the code at {head}: run `db upgrade`")
            try:
                cipher = TokenCipher(load_key(dep.settings, create=False))
            except ConfigError as exc:
                raise refuse(f"no usable token key: {exc}") from None
            row = conn.execute(
                "SELECT id FROM cabinets WHERE wb_token_encrypted IS NOT NULL ORDER BY status <> 'active', id LIMIT 1"
            ).fetchone()
            if row is not None:
                try:
                    get_token(conn, cipher, row[0])
                except ConfigError:
                    raise refuse(
                        f"the token key (OPTIMA_SECRET_KEY or secret.key) does not decrypt cabinet {row[0]}'s WB "
                        "token: it is not this deployment's key"
                    ) from None
    except DatabaseUnavailable as exc:
        raise refuse(f"database: {exc}") from None
    broker = broker_reachable(env)
    if not broker.ok:
        raise refuse(broker.detail)


@serve_group.command("webserver")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the UI listens on.")
@click.option("--port", default=3000, show_default=True, type=int)
@click.option("--code-server", default=CODE_SERVER_DEFAULT, show_default=True, help="HOST:PORT of the code server.")
@click.option("--wait", default=300, show_default=True, type=int, help="Seconds to wait for the code server.")
@click.option("--path-prefix", default="", help="Serve the UI under this path (behind a proxy).")
def webserver_cmd(host: str, port: int, code_server: str, wait: int, path_prefix: str) -> None:
    """The Dagster UI, behind HTTP basic auth when OPTIMA_UI_USER and OPTIMA_UI_PASSWORD are set."""
    from optima_pipelines.operations import webserver
    from optima_pipelines.settings import load_settings

    settings = load_settings()
    credentials = webserver.Credentials.from_settings(settings.ui_user, settings.ui_password)
    grpc_host, grpc_port = processes.parse_address(code_server)
    with open_deployment(settings, migrate=False) as dep:
        dep.apply_env()
        workspace = processes.write_grpc_workspace(dep.dagster_home, grpc_host, grpc_port)
        banner = auth_banner(settings.ui_user, settings.ui_password)
        click.echo(f"Dagster UI: http://{host}:{port}{path_prefix} ({banner})")
        processes.wait_for_code_server(grpc_host, grpc_port, wait)
        args = ["-h", host, "-p", str(port), "-w", str(workspace)]
        if path_prefix:
            args += ["-l", path_prefix]
        webserver.run(args, credentials)


@click.command("metrics")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=METRICS_PORT_DEFAULT, show_default=True, type=int)
def metrics_cmd(host: str, port: int) -> None:
    """Serve /metrics (Prometheus) and /health for this deployment."""
    from optima_pipelines.operations import server

    with open_deployment(migrate=False) as dep:
        dep.apply_env()
        click.echo(f"metrics: http://{host}:{port}/metrics  health: http://{host}:{port}/health")
        server.serve(dep, host, port)


@click.command("health")
@click.option("--wb/--no-wb", default=True, show_default=True, help="Also ping WB's hosts (3 per 30 s per host).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def health_cmd(wb: bool, as_json: bool) -> None:
    """Check the warehouse, Dagster's storage, the daemon and WB; exit 1 naming what failed."""
    from dagster import DagsterInstance

    from optima_pipelines.operations.health import check_warehouse, run_checks

    with open_deployment(migrate=False) as dep:
        setup = check_warehouse(dep.database_url, dep.schema, dep.settings.dagster_schema)
        if not setup.ok:  # nothing else can be checked (Dagster would try to create its tables)
            raise ConfigError(f"{setup.name}: {setup.detail}")
        dep.apply_env()
        with DagsterInstance.get() as instance:
            checks = run_checks(
                dep.database_url,
                dep.schema,
                lambda: instance,
                dep.cipher(),
                dep.settings.wb_base_url,
                dagster_schema=dep.settings.dagster_schema,
                wb=wb,
            )
    if as_json:
        click.echo(json.dumps({"healthy": all(c.ok for c in checks), "checks": [c.as_dict() for c in checks]}))
    else:
        for check in checks:
            click.echo(check.line())
    failed = [c.name for c in checks if not c.ok]
    if failed:
        click.echo(f"error: unhealthy: {', '.join(failed)}", err=True)
        sys.exit(1)


def register(cli: click.Group) -> None:
    cli.add_command(serve_group)
    cli.add_command(metrics_cmd)
    cli.add_command(health_cmd)
