"""`optima-pipelines dev` and `optima-pipelines dagster ...`: Dagster processes on the prepared deployment.

``dev`` runs the same processes as production (``serve code-server``, ``serve daemon``, ``serve
webserver``, ``metrics``: see optima_pipelines/operations/processes.py), each in its own process group,
on one machine, and stops them all (and the embedded database) on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import socket
import sys

import click

from optima_pipelines.cli.operations import METRICS_PORT_DEFAULT, auth_banner
from optima_pipelines.operations import processes
from optima_pipelines.operations.daemon import refuse_if_running
from optima_pipelines.operations.runtime import demo_setup, open_deployment, serve_demo_wb
from optima_pipelines.settings import Settings, run_launcher_choice


class _Stop(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _demo_simulator(settings: Settings):  # type: ignore[no-untyped-def]
    """After `optima-pipelines demo`, `dev` serves the same simulated WB again as a process of its
    own, so the demo's cabinets keep syncing."""
    setup = demo_setup(settings)
    if setup is None:
        return None
    port = _free_port()
    argv = [
        sys.executable, "-m", "optima_pipelines.cli", "wb-sim", "--port", str(port), "--seed", str(setup.seed),
        "--cabinets", str(setup.cabinets), "--orders-per-day", str(setup.orders_per_day), "--prefix", setup.prefix,
        "--time-scale", str(setup.time_scale),
    ]  # fmt: skip
    return argv, f"http://127.0.0.1:{port}", setup.time_scale


def _raise_stop(_signum, _frame):  # type: ignore[no-untyped-def]
    raise _Stop


def dev_services(
    code_server: str,
    module: str,
    host: str,
    port: int,
    metrics_host: str,
    metrics_port: int,
    launcher: str,
    run_workers: int,
) -> list[tuple[str, list[str]]]:
    """The processes of `dev`, each (name, argv). The UI listens on ``host``; /metrics and /health, which
    have no auth, on ``metrics_host`` whatever ``host`` is."""
    cli = [sys.executable, "-m", "optima_pipelines.cli"]
    grpc_host, grpc_port = processes.parse_address(code_server)
    services = [
        ("code server", [*cli, "serve", "code-server", "-m", module, "--host", grpc_host, "--port", str(grpc_port)]),
        ("daemon", [*cli, "serve", "daemon", "--code-server", code_server]),
        ("webserver", [*cli, "serve", "webserver", "--host", host, "--port", str(port), "--code-server", code_server]),
    ]
    if launcher == "celery" and run_workers:
        # The run queue's slots shared among the workers: every run the queue lets through finds a
        # warm process at once.
        per_worker = -(-processes.RUN_WORKER_CONCURRENCY // run_workers)
        for n in range(1, run_workers + 1):
            argv = [*cli, "serve", "run-worker", "-m", module, "-c", str(per_worker), "--name", f"run-worker-{n}"]
            services.append((f"run worker {n}", argv))
    if metrics_port:
        services.append(("metrics", [*cli, "metrics", "--host", metrics_host, "--port", str(metrics_port)]))
    return services


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the UI listens on.")
@click.option("--port", default=3000, show_default=True, type=int, help="Port of the UI.")
@click.option(
    "--metrics-port", default=METRICS_PORT_DEFAULT, show_default=True, type=int, help="Port of /metrics; 0: none."
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address /metrics and /health listen on (no auth: keep it internal; --host does not move it).",
)
@click.option("-m", "--module", default=processes.DEFINITIONS_MODULE, show_default=True, help="Definitions module.")
@click.option(
    "--run-workers",
    default=1,
    show_default=True,
    type=click.IntRange(0, 16),
    help="How many run worker processes (`serve run-worker`) to start (none with OPTIMA_RUN_LAUNCHER=spawn; "
    "0: none here, they run elsewhere).",
)
def dev_cmd(host: str, port: int, metrics_port: int, metrics_host: str, module: str, run_workers: int) -> None:
    """Run the Dagster UI, the daemon, the code server and the metrics process (Ctrl-C stops all);
    and the warm run workers (unless OPTIMA_RUN_LAUNCHER=spawn)."""
    launcher = run_launcher_choice()
    with open_deployment() as dep:
        auth_banner(dep.settings.ui_user, dep.settings.ui_password)  # fails early when half-configured
        refuse_if_running(dep.storage_url)  # one daemon per storage (operations/daemon.py): before anything starts
        dep.cipher()  # the token key exists (the state folder's, made once) before the run workers ask for it
        code_server = f"{processes.CODE_SERVER_HOST}:{_free_port()}"
        env = dep.child_env()
        click.echo(f"database: {dep.masked_url()} (environment {dep.settings.env})")
        click.echo(f"DAGSTER_HOME: {dep.dagster_home}")
        # The webserver and the metrics process print their own addresses (and whether auth is on).
        services = dev_services(code_server, module, host, port, metrics_host, metrics_port, launcher, run_workers)
        if launcher == "celery" and run_workers == 0:
            click.echo("run launcher: celery, no run worker here: start `optima-pipelines serve run-worker`")
        elif launcher == "celery":
            per_worker = -(-processes.RUN_WORKER_CONCURRENCY // run_workers)
            click.echo(f"run launcher: celery, {run_workers} run worker(s) x {per_worker} processes")
        demo_sim = _demo_simulator(dep.settings)
        if demo_sim is not None:
            argv, base_url, time_scale = demo_sim
            services.insert(0, ("WB simulator", argv))
            env.update(OPTIMA_WB_BASE_URL=base_url, OPTIMA_WB_TIME_SCALE=str(time_scale))
            click.echo(f"WB simulator (from the demo): {base_url}")

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
        env = {**dep.child_env(), **serve_demo_wb(dep.settings)}
        # Dagster's own commands start no run worker: their runs spawn (orchestration/run_launcher.py).
        env["OPTIMA_RUN_LAUNCHER"] = env.get("OPTIMA_RUN_LAUNCHER", "").strip() or "spawn"
        code = processes.run_child([sys.executable, "-m", "dagster", *args], env)
    sys.exit(code)


def register(cli: click.Group) -> None:
    cli.add_command(dev_cmd)
    cli.add_command(dagster_cmd)
