"""Dagster's own commands, run as a Dagster user runs them: in the repository root, on the embedded
default, with nothing set but the state folder (a fresh one for this module, instead of `.optima/`),
the simulated WB's address, and PATH and HOME.

One embedded server and one simulated WB for the module; `dagster dev`, `dg dev` and the webserver
with the daemon are each started once, and each start is asked several things.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from optima_pipelines.orchestration.cadences import cadences
from optima_pipelines.timeutil import today_moscow
from tests.system.harness import free_port
from wb_simulator import CabinetSpec, Simulator, serve

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CABINET = "c1"
RUN_LINE = re.compile(r"^run ([0-9a-f-]{36}): (\w+), materialized (.+)$", re.M)
#: Dagster's own deprecation note on `dagster asset materialize` ("Use 'dg launch' instead"): two lines
#: that are Dagster's, printed before anything of ours runs.
DAGSTER_NOTE = ("SupersessionWarning", "return callback(*args, **kwargs)")
FORM = "CABINET|YYYY-MM-DD"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("dagster-commands")
    sim = Simulator(seed=5, cabinets=[CabinetSpec(id=CABINET, orders_per_day=40, products=10)], time_scale=60)
    with serve(sim) as base_url:
        environment = {
            # The venv's commands first; the embedded server's first start creates its system user.
            "PATH": f"{BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            # As an activated venv sets it: dg warns when a venv in the project root (.venv) is not
            # the active one, and a user who made the README's venv there has it activated.
            **({"VIRTUAL_ENV": sys.prefix} if sys.prefix != sys.base_prefix else {}),
            "HOME": str(tmp / "home"),
            "LANG": "C.UTF-8",
            "OPTIMA_STATE_DIR": str(tmp / "state"),
            "OPTIMA_WB_BASE_URL": base_url,
            "OPTIMA_WB_TIME_SCALE": "60",
            # Every sensor and schedule stopped: on 2 cores their start-up burst would only slow the
            # runs these tests launch (a Dagster user's deployment runs them, to the same effect).
            "OPTIMA_AUTOMATIONS_STOPPED": ",".join(c.name for c in cadences()),
        }
        (tmp / "home").mkdir()
        added = run([f"{BIN}/optima-pipelines", "cabinets", "add", CABINET, "--token-env", "WB_TOKEN"],
                    {**environment, "WB_TOKEN": sim.token(CABINET)})  # fmt: skip
        assert added.returncode == 0, added.stderr
        yield environment


def run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def ours(stream: str) -> list[str]:
    return [line for line in stream.splitlines() if line.strip() and not any(n in line for n in DAGSTER_NOTE)]


def assert_one_line(result: subprocess.CompletedProcess, *expected: str) -> None:
    """A bad request: exit code non-zero, and one line, naming what was wrong and the valid form."""
    assert result.returncode != 0, result.stdout + result.stderr
    lines = ours(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in expected:
        assert part in lines[0], (part, lines[0])
    assert "Traceback" not in result.stdout + result.stderr


def materialized(result: subprocess.CompletedProcess) -> list[tuple[str, str, str]]:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return RUN_LINE.findall(result.stdout)


def test_one_off_commands_work_in_the_repository_root_and_say_what_they_did(env: dict[str, str]) -> None:
    yesterday = today_moscow() - timedelta(days=1)
    day, before = yesterday.isoformat(), (yesterday - timedelta(days=1)).isoformat()

    validated = run([f"{BIN}/dagster", "definitions", "validate"], env)
    assert validated.returncode == 0, validated.stderr[-3000:]
    assert "All code locations passed validation" in validated.stderr + validated.stdout

    checked = run([f"{BIN}/dg", "check", "defs"], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    listed = run([f"{BIN}/dg", "list", "defs"], env)
    assert listed.returncode == 0, listed.stderr
    assert "wb_orders" in listed.stdout and "rnp_daily" in listed.stdout

    # A good materialization prints its run and what it materialized: Dagster's command, dg's, ours.
    plain = run([f"{BIN}/dagster", "asset", "materialize", "-m", "optima_pipelines.definitions",
                 "--select", "wb_orders", "--partition", f"{CABINET}|{day}"], env)  # fmt: skip
    [(run_id, status, what)] = materialized(plain)
    assert (status, what) == ("SUCCESS", f"wb_orders {CABINET}|{day}")
    launched = run([f"{BIN}/dg", "launch", "--assets", "wb_sales", "--partition", f"{CABINET}|{day}"], env)
    assert [m[1:] for m in materialized(launched)] == [("SUCCESS", f"wb_sales {CABINET}|{day}")]
    wrapped = run([f"{BIN}/optima-pipelines", "dagster", "asset", "materialize", "-m", "optima_pipelines.definitions",
                   "--select", "wb_orders", "--partition", f"{CABINET}|{before}"], env)  # fmt: skip
    assert [m[1:] for m in materialized(wrapped)] == [("SUCCESS", f"wb_orders {CABINET}|{before}")]
    assert len({run_id, *(m[0] for m in materialized(launched) + materialized(wrapped))}) == 3

    # A bad request: one line, exit code 1, no traceback, from each program (the hook that prints it
    # is the process's; tests/dagster/test_dagster_cli_errors.py asks Dagster's command every kind of
    # bad request in process).
    materialize = [f"{BIN}/dagster", "asset", "materialize", "-m", "optima_pipelines.definitions"]
    assert_one_line(
        run([*materialize, "--select", "wb_orders", "--partition", f"nosuch|{day}"], env),
        "cabinet 'nosuch' is not registered",
        f"cabinets: {CABINET}",
        FORM,
    )
    wrapper = [f"{BIN}/optima-pipelines", "dagster", "asset", "materialize", "-m", "optima_pipelines.definitions"]
    assert_one_line(
        run([*wrapper, "--select", "wb_orders", "--partition", f"{CABINET}|{day[:4]}-02-30"], env),
        "is not a date",
        FORM,
    )
    assert_one_line(
        run([f"{BIN}/dg", "launch", "--assets", "wb_orders", "--partition", f"{CABINET}/{day}"], env),
        f"'{CABINET}/{day}'",
        FORM,
    )


def _child_preexec() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Started:
    """A long-running command started in the repository root; stopped (with what it started) on exit."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self.log_path = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_child_preexec)  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever it left in its group (the code server, run workers)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        return self.proc.returncode


class Ui:
    def __init__(self, port: int, started: list[Started]):
        self.url = f"http://127.0.0.1:{port}"
        self.started = started

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        response = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30)
        response.raise_for_status()
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    def tail(self) -> str:
        return "\n".join(s.log()[-2500:] for s in self.started)

    def wait_loaded(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for s in self.started:
                assert s.proc.poll() is None, f"exited with {s.proc.returncode}:\n{s.log()[-3000:]}"
            try:
                data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }")
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    return
            except (httpx.HTTPError, AssertionError):
                pass
            assert time.monotonic() < deadline, f"not loaded after {timeout} s\n{self.tail()}"
            time.sleep(1)

    def launch(self, asset: str, partition: str | None = None) -> str:
        params: dict = {
            "selector": {"repositoryLocationName": "optima_pipelines", "repositoryName": "__repository__",
                         "jobName": "__ASSET_JOB", "assetSelection": [{"path": [asset]}]},
        }  # fmt: skip
        if partition:
            cabinet, day = partition.split("|")
            tags = {"dagster/partition": partition, "dagster/partition/cabinet": cabinet, "dagster/partition/date": day}
            params["executionMetadata"] = {"tags": [{"key": k, "value": v} for k, v in tags.items()]}
        mutation = (
            "mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename "
            "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"
        )
        result = self.graphql(mutation, {"p": params})["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        return result["run"]["runId"]

    def wait_for_run(self, run_id: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            query = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
            status = self.graphql(query, {"id": run_id})["runOrError"]["status"]
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                return status
            time.sleep(1)
        raise AssertionError(f"run {run_id} not finished after {timeout} s\n{self.tail()}")

    def materializations(self, asset: str) -> list[str]:
        query = (
            "query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset { "
            "assetMaterializations(limit: 20) { partition runId } } } }"
        )
        found = self.graphql(query, {"k": {"path": [asset]}})["assetOrError"].get("assetMaterializations") or []
        return [m["partition"] for m in found]


def check_runs_succeed(ui: Ui, partition_day: str, *, unpartitioned: bool = False) -> None:
    """A partition run of a WB feed, launched from the UI, runs (Dagster's own commands start no run
    worker: their runs spawn) and materializes its partition; with ``unpartitioned``, a run of an
    unpartitioned asset first. Each spawned run is a new Python of 3-4 CPU-s: the unpartitioned run
    is asked of one command only, the partition run (the one that needs the cabinets, the partition
    key's form and WB) of every command."""
    if unpartitioned:
        assert ui.wait_for_run(ui.launch("cabinet_status_summary")) == "SUCCESS"
    key = f"{CABINET}|{partition_day}"
    assert ui.wait_for_run(ui.launch("wb_orders", key)) == "SUCCESS"
    assert key in ui.materializations("wb_orders")


@pytest.mark.parametrize(
    ("command", "days_ago"), [("dagster dev", 3), ("dg dev", 4), ("optima-pipelines dagster dev", 5)]
)
def test_dev_starts_the_deployment_and_its_runs_succeed(
    command: str, days_ago: int, env: dict[str, str], tmp_path: Path
) -> None:
    started_at = time.time()
    port = free_port()
    program, *words = command.split()
    dev = Started([f"{BIN}/{program}", *words, "-p", str(port)], env, tmp_path / "dev.log")
    try:
        ui = Ui(port, [dev])
        ui.wait_loaded()
        check_runs_succeed(
            ui, (today_moscow() - timedelta(days=days_ago)).isoformat(), unpartitioned=command == "dagster dev"
        )
        assert "Traceback" not in dev.log()
    finally:
        dev.stop()
    left = [p for p in ROOT.glob(".tmp_dagster_home_*") if p.stat().st_ctime >= started_at]
    assert not left, f"{command} left its temporary DAGSTER_HOME behind: {left}"


def test_the_webserver_and_the_daemon_started_apart_run_what_the_ui_launches(
    env: dict[str, str], tmp_path: Path
) -> None:
    """`dagster-webserver -w workspace.yaml` as it is; `dagster-daemon run` with DAGSTER_HOME, which
    Dagster's daemon requires (a folder holding the repository's dagster.yaml)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    webserver = Started([f"{BIN}/dagster-webserver", "-w", "workspace.yaml", "-p", str(port)], env,
                        tmp_path / "webserver.log")  # fmt: skip
    daemon = Started([f"{BIN}/dagster-daemon", "run"], {**env, "DAGSTER_HOME": str(home)}, tmp_path / "daemon.log")
    try:
        ui = Ui(port, [webserver, daemon])
        ui.wait_loaded()
        check_runs_succeed(ui, (today_moscow() - timedelta(days=6)).isoformat())
    finally:
        webserver.stop()
        daemon.stop()
