"""Graceful shutdown (ADR-0007): stopping the deployment mid-run loses nothing and leaves nothing STARTED;
SIGTERM to `dev` ends every process it started.

Both stop their shared deployment (tests/system/conftest.py): they run last among its tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterRunStatus

from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from tests.system.harness import wait_for
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system


@pytest.mark.stops_deployment
def test_a_run_interrupted_by_a_stop_is_requeued_and_completes(shared_stack):  # type: ignore[no-untyped-def]
    """On the default launcher (celery: the run in a warm run worker)."""
    stack = shared_stack
    stack.add_cabinets(CabinetSpec(id="s1", products=10, orders_per_day=40, history_days=20))
    # Sales hang: the import is mid-run when the deployment stops.
    stack.sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=300)
    with stack.warehouse() as conn:
        request_id = outbox.create_request(
            conn, "import-user-feeds", "s1", {"dateFrom": (today_moscow() - timedelta(days=3)).isoformat()}
        )
    stack.start("requests_sensor", "digitization_increment_sensor", "dead_run_sensor")

    def in_flight():  # type: ignore[no-untyped-def]
        """The orders/sales run of s1 that is mid-step, held by the hanging sales call (the increment
        sweep the sensor launched at start, or the import)."""
        for run in stack.instance.get_runs():
            if run.job_name not in ("digitization_increment_sweep", "digitization_import"):
                continue
            if run.status == DagsterRunStatus.STARTED and stack.instance.all_logs(
                run.run_id, of_type=DagsterEventType.STEP_START
            ):
                return run.run_id
        return None

    wait_for(lambda: in_flight() is not None, "a run of s1 to be mid-step", timeout=120, dep=stack.dev)
    interrupted = in_flight()
    # The orders are in (their own transaction); the run now waits on sales.
    with stack.warehouse() as conn:
        wait_for(
            lambda: conn.execute("SELECT count(*) FROM wb_orders WHERE cabinet_id = 's1'").fetchone()[0] > 0,
            "orders",
            timeout=60,
        )
    stack.stop_dev()
    assert stack.instance.get_run_by_id(interrupted).status != DagsterRunStatus.SUCCESS

    stack.sim.faults.clear()
    # The sales WB holds before the restart: the import that completes after it must have them all
    # (WB's clock runs on, and a sale made after the import's read is not what this checks).
    since = str(today_moscow() - timedelta(days=3))
    sold = {s["saleID"] for s in stack.sim.truth.sales("s1") if s["date"][:10] >= since}
    restarted = time.time()
    stack.start_dev()

    def request_done() -> bool:
        with stack.warehouse() as conn:
            return outbox.get_request(conn, request_id).status in ("succeeded", "failed")

    wait_for(request_done, "the user's import to finish after the restart", timeout=180, dep=stack.dev)

    def retried() -> list:  # type: ignore[type-arg]
        return [r for r in stack.instance.get_runs() if r.parent_run_id == interrupted]

    wait_for(
        lambda: any(r.status == DagsterRunStatus.SUCCESS for r in retried()),
        "the re-queued run",
        timeout=120,
        dep=stack.dev,
    )
    with stack.warehouse() as conn:
        request = outbox.get_request(conn, request_id)
        ours = {s for (s,) in conn.execute("SELECT sale_id FROM wb_sales WHERE cabinet_id = 's1'").fetchall()}
    assert request.status == "succeeded", request.error
    assert stack.instance.get_run_by_id(interrupted).status == DagsterRunStatus.FAILURE
    assert sold and sold <= ours
    # Nothing of before the stop is left STARTED.
    left = [
        r.dagster_run.run_id
        for r in stack.instance.get_run_records()
        if r.dagster_run.status == DagsterRunStatus.STARTED and r.create_timestamp.timestamp() < restarted
    ]
    assert left == []


def processes_with(marker: bytes) -> list[int]:
    """Processes whose environment holds this exact variable (our test environment's name)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.mark.stops_deployment
def test_stopping_dev_stops_every_process_it_started(warm_stack):  # type: ignore[no-untyped-def]
    """SIGTERM to `dev` ends the code server, daemon, webserver, metrics process and both run workers."""
    deployment = warm_stack.dev
    marker = f"OPTIMA_ENV={warm_stack.env}".encode()
    # dev and its children before: code server, daemon, webserver, metrics, two run workers (and
    # their pool processes)
    assert len(processes_with(marker)) >= 7
    deployment.proc.send_signal(signal.SIGTERM)
    try:
        deployment.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"dev did not stop within 90 s\n{deployment.log()[-3000:]}") from None
    assert processes_with(marker) == []
    assert "stopping..." in deployment.log()
    # dev had to kill no process at the end of its grace period, and each run worker stopped its pool
    # itself: signalled with their group, Celery's pool processes died under their parent ("exited
    # with 'signal 15 (SIGTERM)'"), which respawned them and could hang on the pool's lock until the
    # grace period ran out. (A Celery still stopping 10 s after the signal is killed by its run worker,
    # which says so: billiard can still hang there, seen once in a whole-suite run.)
    log = deployment.log()
    assert "did not stop within 30 s" not in log, log[-3000:]
    assert "exited with 'signal 15" not in log, log[-3000:]
    assert "Cold shutdown" in log
