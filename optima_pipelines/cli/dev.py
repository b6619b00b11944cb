"""`optima-pipelines dev` and `optima-pipelines dagster ...`: Dagster processes on the prepared deployment."""

from __future__ import annotations

import signal
import subprocess
import sys

import click

from optima_pipelines.runtime import open_deployment, project_file


def run_child(argv: list[str], env: dict[str, str]) -> int:
    """Run a child process in the foreground; Ctrl-C and SIGTERM reach it, and we wait for it to finish."""
    # A shell that starts us in the background makes SIGINT ignored, and Dagster maps SIGTERM onto
    # SIGINT's handler: restore the default in the child so that both signals stop it.
    proc = subprocess.Popen(argv, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def forward(signum, _frame):  # type: ignore[no-untyped-def]
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.kill()


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the UI listens on.")
@click.option("--port", default=3000, show_default=True, type=int, help="Port of the UI.")
def dev_cmd(host: str, port: int) -> None:
    """Run the Dagster UI, the daemon and the code server on this deployment (Ctrl-C stops all)."""
    with open_deployment() as dep:
        click.echo(f"database: {dep.masked_url()} (environment {dep.settings.env})")
        click.echo(f"DAGSTER_HOME: {dep.dagster_home}")
        click.echo(f"Dagster UI: http://{host}:{port}")
        argv = [
            sys.executable,
            "-m",
            "dagster",
            "dev",
            "-w",
            str(project_file("workspace.yaml")),
            "-h",
            host,
            "-p",
            str(port),
        ]
        code = run_child(argv, dep.child_env())
    sys.exit(code if code > 0 else 0)


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
        code = run_child([sys.executable, "-m", "dagster", *args], dep.child_env())
    sys.exit(code)


def register(cli: click.Group) -> None:
    cli.add_command(dev_cmd)
    cli.add_command(dagster_cmd)
