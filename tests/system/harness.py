"""System-test harness: the real `optima-pipelines dev` (webserver + daemon + code server) as processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

#: The code location every deployment serves, as GraphQL selectors name it.
LOCATION = {"repositoryLocationName": "optima_pipelines", "repositoryName": "__repository__"}
QUERY_AUTOMATION = """
query($sel: %(type)s!) { %(field)s(%(arg)s: $sel) { __typename ... on %(node)s { id } ... on PythonError { message } } }
"""
STOP_SENSOR = """
mutation($id: String!) { stopSensor(id: $id) { __typename ... on PythonError { message } } }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningDeployment:
    def __init__(
        self,
        proc: subprocess.Popen,
        port: int,
        log_path: Path,
        metrics_port: int | None = None,
        auth: tuple[str, str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.proc = proc
        self.port = port
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{port}"
        self.metrics_url = f"http://127.0.0.1:{metrics_port}" if metrics_port else None
        #: (user, password) of the UI's basic auth, when the deployment was started with it.
        self.auth = auth
        #: The environment variables the deployment was started with (on top of this process's).
        self.env = env or {}

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        response = httpx.post(
            f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=timeout, auth=self.auth
        )
        response.raise_for_status()
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_run(self, run_id: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        status = "UNKNOWN"
        while time.monotonic() < deadline:
            data = self.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id})
            status = data["runOrError"].get("status", "UNKNOWN")
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                return status
            time.sleep(1)
        raise AssertionError(f"run {run_id} still {status} after {timeout}s\n{self.log()[-3000:]}")


@contextmanager
def running_dev(
    env: dict[str, str], tmp_path: Path, *, ready_timeout: float = 120, args: tuple[str, ...] = ()
) -> Iterator[RunningDeployment]:
    """Start `optima-pipelines dev` on free ports and wait until its code location is loaded.

    ``env`` may set OPTIMA_UI_USER / OPTIMA_UI_PASSWORD: the harness then authenticates its GraphQL
    calls. ``args`` go to ``dev`` (e.g. ``("-m", "tests.system.some_location")``).
    """
    port, metrics_port = free_port(), free_port()
    full_env = {**os.environ, **env}
    user, password = full_env.get("OPTIMA_UI_USER"), full_env.get("OPTIMA_UI_PASSWORD")
    auth = (user, password) if user and password else None
    log_path = tmp_path / f"dev-{port}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "optima_pipelines.cli",
                "dev",
                "--port",
                str(port),
                "--metrics-port",
                str(metrics_port),
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
    dep = RunningDeployment(proc, port, log_path, metrics_port, auth, env)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"optima-pipelines dev exited with {proc.returncode}:\n{dep.log()[-3000:]}")
            try:
                data = dep.graphql(
                    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                    "locationOrLoadError { __typename } } } } }",
                    timeout=5,
                )
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    break
            except (httpx.HTTPError, AssertionError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"UI not ready after {ready_timeout}s:\n{dep.log()[-3000:]}")
            time.sleep(1)
        yield dep
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_for(condition, what: str, *, timeout: float = 120, dep: RunningDeployment | None = None):  # type: ignore[no-untyped-def]
    """Poll ``condition`` every second until it returns something truthy (returned); fail naming
    ``what`` after ``timeout`` s, with the end of the deployment's log when ``dep`` is given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1)
    log = f"\n{dep.log()[-3000:]}" if dep is not None else ""
    raise AssertionError(f"{what} not within {timeout:.0f} s{log}")


def only_automations(*running: str) -> dict[str, str]:
    """The environment that starts every sensor and schedule but these stopped (OPTIMA_AUTOMATIONS_STOPPED).

    A test's deployment runs what it exercises: on a 2-core machine the start-up burst of every other
    feed (ads, funnel, prices, the engines...) would otherwise compete with the runs under test.
    """
    from optima_pipelines.orchestration.cadences import cadences

    names = [c.name for c in cadences()]
    unknown = set(running) - set(names)
    assert not unknown, f"no such sensor or schedule: {unknown}"
    return {"OPTIMA_AUTOMATIONS_STOPPED": ",".join(n for n in names if n not in running)}


def automation_id(dep: RunningDeployment, kind: str, name: str) -> str:
    """The id of a schedule (``kind`` "schedule") or sensor ("sensor") of the code location, through
    GraphQL, as the UI finds it; fails naming it when the deployment has no such one."""
    params = (
        {"type": "ScheduleSelector", "field": "scheduleOrError", "arg": "scheduleSelector", "node": "Schedule"}
        if kind == "schedule"
        else {"type": "SensorSelector", "field": "sensorOrError", "arg": "sensorSelector", "node": "Sensor"}
    )
    key = "scheduleName" if kind == "schedule" else "sensorName"
    result = dep.graphql(QUERY_AUTOMATION % params, {"sel": {**LOCATION, key: name}})[params["field"]]
    if "id" not in result:
        raise AssertionError(f"no {kind} {name!r} in the deployment: {result}")
    return result["id"]
