"""`optima-pipelines dev` and `optima-pipelines dagster ...`: Dagster processes on the prepared deployment.

``dev`` runs the same processes as production (``serve code-server``, ``serve daemon``, ``serve
webserver``, ``metrics``: see optima_pipelines/ops/processes.py), each in its own process group,
on one machine, and stops them all (and the embedded database) on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import socket
import sys

import click

from optima_pipelines.cli.ops import METRICS_PORT_DEFAULT, auth_banner
from optima_pipelines.ops import processes
from optima_pipelines.runtime import open_deployment


class _Stop(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raise_stop(_signum, _frame):  # type: ignore[no-untyped-def]
    raise _Stop


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the UI (and metrics) listen on.")
@click.option("--port", default=3000, show_default=True, type=int, help="Port of the UI.")
@click.option(
    "--metrics-port", default=METRICS_PORT_DEFAULT, show_default=True, type=int, help="Port of /metrics; 0: none."
)
@click.option("-m", "--module", default=processes.DEFINITIONS_MODULE, show_default=True, help="Definitions module.")
def dev_cmd(host: str, port: int, metrics_port: int, module: str) -> None:
    """Run the Dagster UI, the daemon, the code server and the metrics process (Ctrl-C stops all)."""
    cli = [sys.executable, "-m", "optima_pipelines.cli"]
    with open_deployment() as dep:
        auth_banner(dep.settings.ui_user, dep.settings.ui_password)  # fails early when half-configured
        code_server = f"{processes.CODE_SERVER_HOST}:{_free_port()}"
        env = dep.child_env()
        click.echo(f"database: {dep.masked_url()} (environment {dep.settings.env})")
        click.echo(f"DAGSTER_HOME: {dep.dagster_home}")
        # The webserver and the metrics process print their own addresses (and whether auth is on).
        grpc_host, grpc_port = processes.parse_address(code_server)
        services = [
            (
                "code server",
                [*cli, "serve", "code-server", "-m", module, "--host", grpc_host, "--port", str(grpc_port)],
            ),
            ("daemon", [*cli, "serve", "daemon", "--code-server", code_server]),
            (
                "webserver",
                [*cli, "serve", "webserver", "--host", host, "--port", str(port), "--code-server", code_server],
            ),
        ]
        if metrics_port:
            services.append(("metrics", [*cli, "metrics", "--host", host, "--port", str(metrics_port)]))

        supervisor = processes.Supervisor()
        previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
        code = 0
        try:
            for name, argv in services:
                supervisor.start(name, argv, env)
            died = supervisor.first_exit()
            code = died.proc.returncode or 1
            click.echo(f"error: the {died.name} exited with code {died.proc.returncode}; stopping the others", err=True)
        except _Stop:
            click.echo("stopping...")
        finally:
            # A second Ctrl-C while stopping must not leave children behind.
            for s in previous:
                signal.signal(s, signal.SIG_IGN)
            supervisor.stop()
            for s, handler in previous.items():
                signal.signal(s, handler)
    sys.exit(code)


@click.command(
    "dagster",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def dagster_cmd(args: tuple[str, ...]) -> None:
    """Run any `dagster` CLI command on this deployment, e.g.

    optima-pipelines dagster asset materialize -m optima_pipelines.definitions --select wb_orders --partition 'c1|2026-11-29'
    """
    with open_deployment() as dep:
        code = processes.run_child([sys.executable, "-m", "dagster", *args], dep.child_env())
    sys.exit(code)


def register(cli: click.Group) -> None:
    cli.add_command(dev_cmd)
    cli.add_command(dagster_cmd)
