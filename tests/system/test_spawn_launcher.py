"""OPTIMA_RUN_LAUNCHER=spawn end to end: no run workers; the code server starts a fresh process per run.

The shared spawn deployment (tests/system/conftest.py) takes a user's import from the requests table
to rows in the warehouse, as the default launcher does (tests/system/test_concurrency.py).
"""

from __future__ import annotations

from datetime import timedelta

import psutil
import pytest
from dagster import DagsterEventType

from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from tests.system.harness import wait_for
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system


def command_lines(pid: int) -> dict[int, str]:
    """The command lines of a process's descendants (a run process that just ended is skipped)."""
    lines = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            lines[child.pid] = " ".join(child.cmdline())
        except psutil.Error:  # gone, or a zombie until the code server reaps it
            continue
    return lines


def test_a_user_import_runs_in_a_process_the_code_server_started(spawn_stack):  # type: ignore[no-untyped-def]
    stack, dev = spawn_stack, spawn_stack.dev
    stack.add_cabinets(CabinetSpec(id="sp1", products=10, orders_per_day=40, history_days=20))
    # No run worker among dev's processes: only the code server can start a run.
    processes = command_lines(dev.proc.pid)
    assert not [line for line in processes.values() if "run-worker" in line], processes
    code_servers = {pid for pid, line in processes.items() if "code-server" in line}
    assert code_servers, processes

    stack.start("requests_sensor")
    since = today_moscow() - timedelta(days=3)
    # What WB holds of those days when the user asks (its clock runs on: orders placed during the
    # import may come after the import's read, and are not what this checks).
    wb = {o["srid"] for o in stack.sim.truth.orders("sp1") if o["date"][:10] >= since.isoformat()}
    with stack.warehouse() as conn:
        request_id = outbox.create_request(conn, "import-user-feeds", "sp1", {"dateFrom": since.isoformat()})
        request = wait_for(
            lambda: (r := outbox.get_request(conn, request_id)).status in ("succeeded", "failed") and r,
            "the user's import to finish",
            timeout=240,
            dep=dev,
        )
        assert request.status == "succeeded", request.error
        ours = {s for (s,) in conn.execute("SELECT srid FROM wb_orders WHERE cabinet_id = 'sp1'").fetchall()}
    # The request is marked done from inside the run: the run itself ends a moment later.
    assert dev.wait_for_run(request.run_id, timeout=60) == "SUCCESS"
    run = stack.instance.get_run_by_id(request.run_id)
    assert run is not None
    assert not any(key.startswith("dagster-celery/") for key in run.tags), run.tags
    # The run's process was a child of the code server, and is gone with the run.
    [start] = stack.instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_START)
    assert start.dagster_event is not None and start.dagster_event.pid not in code_servers
    engine = [e.message for e in stack.instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT)]
    assert any("Started process for run" in m for m in engine), engine
    # What WB held of those days when the user asked is in the warehouse.
    assert wb and wb <= ours
