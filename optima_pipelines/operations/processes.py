"""The deployment's long-running processes, as ``dev`` runs them and as ``deploy/`` runs them in production.

Four processes (five with warm run workers), each an ``optima-pipelines serve ...`` command (or ``metrics``):

- ``code-server``: Dagster's code server (gRPC) for the code location (with ``OPTIMA_RUN_LAUNCHER=spawn``
  it also starts a process per run).
- ``daemon``: ``dagster-daemon`` (schedules, sensors, the run queue, run monitoring, backfills), its
  sensor loop every second (``operations/daemon.py``).
- ``webserver``: the Dagster UI behind basic auth (``operations/webserver.py``).
- ``metrics``: ``/metrics`` and ``/health`` (``operations/server.py``).
- ``run-worker`` (with the default ``OPTIMA_RUN_LAUNCHER=celery``): warm run workers taking runs from
  the broker instead of the code server starting a process per run (``orchestration/run_launcher.py``);
  any number of them, on any number of hosts.

The daemon and the webserver both talk to the one code server through a workspace file written
into DAGSTER_HOME (:func:`write_grpc_workspace`), so definitions are loaded once, not three times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from optima_pipelines.errors import ConfigError

DEFINITIONS_MODULE = "optima_pipelines.definitions"
LOCATION_NAME = "optima_pipelines"
CODE_SERVER_HOST = "127.0.0.1"
CODE_SERVER_PORT = 4000
GRPC_WORKSPACE = "workspace-grpc.yaml"


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); raises ConfigError naming the bad value."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"expected HOST:PORT for the code server, got {value!r}")
    return host, int(port)


def write_grpc_workspace(dagster_home: Path, host: str, port: int, location_name: str = LOCATION_NAME) -> Path:
    """A workspace that points at a running code server, for the daemon and the webserver."""
    path = dagster_home / GRPC_WORKSPACE
    text = (
        "# Written by optima-pipelines: the daemon and the webserver load the code location from the\n"
        "# code server (`optima-pipelines serve code-server`) instead of importing it themselves.\n"
        "load_from:\n"
        "  - grpc_server:\n"
        f"      host: {host}\n"
        f"      port: {port}\n"
        f"      location_name: {location_name}\n"
    )
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)  # atomic: the daemon and the webserver may write it at the same time
    return path


def code_server_argv(module: str, location_name: str, host: str, port: int, forkserver: bool = False) -> list[str]:
    if forkserver:
        # Issue 17's way (b), measured by bench/orchestration.py: `dagster api grpc` in a process of
        # ours, its run workers forked from a preloaded forkserver (operations/forkserver_code_server.py).
        return [
            sys.executable, "-m", "optima_pipelines.operations.forkserver_code_server", "-m", module,
            "--location-name", location_name, "-h", host, "-p", str(port), "--use-python-environment-entry-point",
        ]  # fmt: skip
    return [
        sys.executable,
        "-m",
        "dagster",
        "code-server",
        "start",
        "-m",
        module,
        "--location-name",
        location_name,
        "-h",
        host,
        "-p",
        str(port),
        # Run workers are started as `<this python> -m dagster`: the venv's, whatever PATH says.
        "--use-python-environment-entry-point",
    ]


#: Processes of one run worker (``serve run-worker``): as many as dagster.yaml's max_concurrent_runs,
#: so that every run the queue lets through finds a warm process at once.
RUN_WORKER_CONCURRENCY = 8


#: How long dev's processes may take to stop once told to, before dev kills what is left.
STOP_GRACE_SECONDS = 30.0
#: How long a run worker's Celery may take to stop once told to (``serve run-worker``), less than
#: dev's grace period: its runs are interrupted anyway.
RUN_WORKER_STOP_SECONDS = 10.0


def run_worker_argv(concurrency: int, name: str) -> list[str]:
    """A warm run worker (the default launcher, celery): a Celery prefork worker whose processes
    imported Dagster and the definitions once (orchestration/run_launcher.py). Its node name is
    ``NAME@<this host>``, or ``name`` itself when it names a host (``NAME@HOST``)."""
    node = name if "@" in name else f"{name}@%h"
    return [
        sys.executable, "-m", "celery", "-A", "optima_pipelines.orchestration.run_workers", "worker",
        "--pool", "prefork", "--concurrency", str(concurrency), "--hostname", node,
        "--queues", "optima-runs", "--prefetch-multiplier", "1", "-O", "fair", "--loglevel", "INFO",
        # Gossip, mingle and the heartbeat are broadcasts between workers: nothing here uses them,
        # and the SQLAlchemy transport cannot carry them.
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip


def code_server_serving(host: str, port: int, timeout: float = 5.0) -> bool:
    """Whether the code server at host:port answers Dagster's gRPC health check with SERVING (what
    `dagster api grpc-health-check` asks, in this process rather than a new one per try)."""
    import grpc
    from grpc_health.v1 import health_pb2
    from grpc_health.v1.health_pb2_grpc import HealthStub

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        try:
            response = HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="DagsterApi"), timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def wait_for_code_server(host: str, port: int, timeout: float) -> None:
    """Poll the code server's gRPC health check until it serves; raises ConfigError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not code_server_serving(host, port):
        if time.monotonic() > deadline:
            raise ConfigError(f"the code server at {host}:{port} did not answer within {timeout:.0f} s")
        time.sleep(0.5)


def _child_preexec() -> None:
    # A shell that starts us in the background makes SIGINT ignored, and Dagster maps SIGTERM onto
    # SIGINT's handler: restore the default so that both signals stop the child.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen


class Supervisor:
    """Starts named children in their own process groups; stops them in reverse order, then kills what is left."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        proc = subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=_child_preexec)
        child = Child(name, proc)
        self.children.append(child)
        return child

    def first_exit(self, poll: float = 0.5) -> Child:
        """Block until one child exits; returns it."""
        while True:
            for child in self.children:
                if child.proc.poll() is not None:
                    return child
            time.sleep(poll)

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM to every child at once, one grace period for all, then SIGKILL what is left.

        The signal goes to each child, not to its process group: each stops what it started itself
        (a run worker its pool's processes, the code server its server process). Signalled with the
        group, Celery's pool processes died under their parent while one held the pool's queue lock:
        the parent then hung until the grace period ran out, respawning pool processes meanwhile.

        Runs in flight are interrupted with their worker: they end failed (or are marked failed by
        dead_run_sensor when the deployment is back) and dagster.yaml's run_retries re-queues them
        once; their data is whole (every load commits in transactions)."""
        for child in reversed(self.children):
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(c.proc.poll() is None for c in self.children) and time.monotonic() < deadline:
            time.sleep(0.1)
        for child in reversed(self.children):
            if child.proc.poll() is None:
                print(f"the {child.name} did not stop within {grace:.0f} s: killed", file=sys.stderr, flush=True)
            # Whatever the child left behind in its group (run workers, the code server's own
            # server process) goes with it.
            _signal_group(child.proc, signal.SIGKILL)
            if child.proc.poll() is None:
                child.proc.wait()


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        parent = psutil.Process(pid)
        for process in [*parent.children(recursive=True), parent]:
            process.kill()
    except psutil.Error:  # gone meanwhile
        pass


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(
    argv: list[str], env: dict[str, str], stop_signal: int | None = None, stop_timeout: float | None = None
) -> int:
    """Run a child in the foreground; SIGINT and SIGTERM reach it (as ``stop_signal`` when given), and
    we wait for it to finish. With ``stop_timeout``, a child still running that long after it was
    told to stop is killed with every process it started."""
    proc = subprocess.Popen(argv, env=env, preexec_fn=_child_preexec)
    stopping: list[float] = []

    def forward(signum, _frame):  # type: ignore[no-untyped-def]
        if proc.poll() is None:
            proc.send_signal(stop_signal or signum)
            stopping.append(time.monotonic())

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if stop_timeout is None:
            return proc.wait()
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0] > stop_timeout:
                    name = os.path.basename(argv[2] if argv[1:2] == ["-m"] else argv[0])
                    print(f"{name} did not stop within {stop_timeout:.0f} s of the signal: killed", file=sys.stderr)
                    _kill_tree(proc.pid)
                    return proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.kill()
