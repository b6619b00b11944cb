"""Warm run workers (OPTIMA_RUN_LAUNCHER=celery, issue 17): the real deployment with its run workers in
two separate processes, termination from the UI and a killed worker. (A stop mid-run on this
launcher, the default: tests/system/test_shutdown.py.)

The shared warm deployment (tests/system/conftest.py) is `optima-pipelines dev --run-workers 2`: two
`serve run-worker` processes (Celery prefork workers named run-worker-1 and run-worker-2) on the
embedded default broker, PostgreSQL itself. A run's worker process is the pid of its "Started
process for run" event; its parent is the worker.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from dagster import DagsterEventType, DagsterRunStatus

from optima_pipelines.orchestration.queues import LANE_SCHEDULED, TAG_CABINET, TAG_LANE
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from tests.system.harness import wait_for
from tests.system.test_concurrency import launch_run, records
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system

#: Seven cabinets: more runs than one worker's processes (`dev --run-workers 2`: 8 / 2 = 4 each).
CABINETS = [f"w{i}" for i in range(1, 8)]
#: How long each of those runs is held by its sales call.
HOLD_S = 20
TERMINATE = """
mutation($runId: String!) {
  terminateRun(runId: $runId) { __typename ... on PythonError { message } ... on TerminateRunFailure { message } }
}
"""


def run_pid(stack, run_id: str) -> int | None:  # type: ignore[no-untyped-def]
    """The process that executed the run (its RUN_START event's)."""
    for entry in stack.instance.all_logs(run_id, of_type=DagsterEventType.RUN_START):
        if entry.dagster_event is not None and entry.dagster_event.pid:
            return entry.dagster_event.pid
    return None


def worker_of(pid: int) -> str | None:
    """The name of the run worker (``--hostname NAME@%h``) whose process ``pid`` is."""
    try:
        argv = psutil.Process(pid).parent().cmdline()
    except (psutil.Error, AttributeError):
        return None
    for i, arg in enumerate(argv):
        if arg == "--hostname" and i + 1 < len(argv):
            return argv[i + 1].split("@")[0]
    return None


def with_cabinets(stack, *ids: str):  # type: ignore[no-untyped-def]
    """The warm deployment with these cabinets, its requests and increments running, WB's statistics slow."""
    stack.add_cabinets(*(CabinetSpec(id=c, products=10, orders_per_day=40, history_days=20) for c in ids))
    stack.start("requests_sensor", "digitization_increment_sensor")
    # WB statistics calls take a while, so that runs overlap.
    stack.sim.faults.set("GET statistics/*", latency_s=0.5)
    return stack


def test_runs_execute_in_both_run_worker_processes(warm_stack):  # type: ignore[no-untyped-def]
    stack = with_cabinets(warm_stack, *CABINETS)
    workers = [
        p for p in psutil.Process(stack.dev.proc.pid).children(recursive=True) if "run-worker-" in " ".join(p.cmdline())
    ]
    mains = {worker_of(c.pid) for w in workers for c in w.children()}
    assert {"run-worker-1", "run-worker-2"} <= mains, mains

    # One single-cabinet increment per cabinet, all at once and each held by its sales call: seven
    # runs are more than one worker's four processes, and a worker takes a run only while a process
    # is free, so the other worker takes the rest rather than them waiting in the first. They are
    # launched in the scheduled lane (a person's runs share the user lane's 2 slots).
    hold = stack.sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=HOLD_S)
    try:
        launched = {
            launch_run(
                stack.dev,
                "digitization_increment",
                cabinet_run_config("digitization_increment", c),
                tags={TAG_LANE: LANE_SCHEDULED},
            )
            for c in CABINETS
        }

        def by_worker() -> dict[str, set[str]]:
            seen: dict[str, set[str]] = {}
            for run_id in launched:
                run = stack.instance.get_run_by_id(run_id)
                if run is None or run.status != DagsterRunStatus.SUCCESS:
                    continue
                pid = run_pid(stack, run_id)
                name = worker_of(pid) if pid else None
                if name:
                    seen.setdefault(name, set()).add(run.tags.get(TAG_CABINET, "?"))
            return seen

        wait_for(
            lambda: sum(map(len, by_worker().values())) == len(CABINETS),
            f"the {len(CABINETS)} increments launched at once to succeed",
            timeout=240,
            dep=stack.dev,
        )
    finally:
        stack.sim.faults.remove(hold)  # the calls it holds are answered now (with_cabinets' 0.5 s stays)
    seen = by_worker()
    assert set(seen) == {"run-worker-1", "run-worker-2"}, seen

    # No run was started by the code server's spawn path: every launched run is a Celery task. A run
    # caught while the launcher sends it (STARTING) gets its task's id a moment later: the check waits
    # for it (a run the spawn path started never gets one).
    def untagged() -> list[str]:
        return [
            record.dagster_run.run_id
            for record in records(stack)
            if record.dagster_run.status not in (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED)
            and "dagster-celery/task_id" not in record.dagster_run.tags
        ]

    wait_for(lambda: not untagged(), "every launched run to carry its Celery task's id", timeout=60, dep=stack.dev)
    failed = [r.dagster_run.run_id for r in records(stack) if r.dagster_run.status == DagsterRunStatus.FAILURE]
    assert failed == []


def _hanging_run(stack, since: float) -> str:  # type: ignore[no-untyped-def]
    """A run held by the sales fault set at ``since``: its step started after ``since`` and 5 s
    ago, or (a sweep that was mid-step at ``since``, which keeps the sensor from launching another)
    it is still in its step HOLD_S + 10 s after ``since``, when every WB call made before the
    fault has returned. A run caught finishing would race the test's own action."""

    def held() -> str | None:
        now = time.time()
        for record in records(stack):
            run = record.dagster_run
            if run.status != DagsterRunStatus.STARTED:
                continue
            starts = stack.instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
            if (
                starts
                and starts[-1].timestamp < now - 5
                and (since < starts[-1].timestamp or now - since > HOLD_S + 10)
            ):
                return run.run_id
        return None

    return wait_for(held, "a run held mid-step by the sales fault", timeout=120, dep=stack.dev)


def test_terminate_from_the_ui_cancels_a_run_in_a_warm_worker(warm_stack):  # type: ignore[no-untyped-def]
    stack = with_cabinets(warm_stack, "wt1", "wt2")
    since = time.time()
    hold = stack.sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=300)
    try:
        run_id = _hanging_run(stack, since)
        pid = run_pid(stack, run_id)
        result = stack.dev.graphql(TERMINATE, {"runId": run_id})["terminateRun"]
        assert result["__typename"] == "TerminateRunSuccess", result
        try:
            wait_for(
                lambda: stack.instance.get_run_by_id(run_id).status == DagsterRunStatus.CANCELED,
                "the terminated run to end CANCELED",
                timeout=60,
            )
        except AssertionError:
            # What the run did instead, for whoever reads the failure.
            events = [
                (
                    e.dagster_event.event_type_value if e.dagster_event else "",
                    e.message[:200],
                    e.dagster_event.pid if e.dagster_event else None,
                )
                for e in stack.instance.all_logs(run_id)
            ]
            events += [
                str(e.dagster_event.event_specific_data)[:3000]
                for e in stack.instance.all_logs(run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)
                if e.dagster_event
            ]
            status = stack.instance.get_run_by_id(run_id).status
            raise AssertionError(f"{status}: {events}\n{stack.dev.log()[-3000:]}") from None
        # The warm process is not lost with the run: it takes the next one.
        assert pid is not None and psutil.pid_exists(pid)
    finally:
        stack.sim.faults.remove(hold)  # the calls it holds are answered now (with_cabinets' 0.5 s stays)


def test_a_killed_run_worker_process_fails_its_run_which_is_retried(warm_stack):  # type: ignore[no-untyped-def]
    stack = with_cabinets(warm_stack, "wk1", "wk2")
    since = time.time()
    hold = stack.sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=300)
    try:
        run_id = _hanging_run(stack, since)
        pid = run_pid(stack, run_id)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # Run monitoring (dagster.yaml, every 15 s) reads the task's state: the worker reports its
        # lost process, the run is marked failed and run_retries re-queues it once.
        wait_for(
            lambda: stack.instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE,
            "run monitoring to mark the killed run failed",
            timeout=90,
            dep=stack.dev,
        )
    finally:
        stack.sim.faults.remove(hold)  # the calls it holds are answered now (with_cabinets' 0.5 s stays)

    def retried_ok() -> bool:
        return any(
            r.dagster_run.parent_run_id == run_id and r.dagster_run.status == DagsterRunStatus.SUCCESS
            for r in records(stack)
        )

    wait_for(retried_ok, "the retry of the killed run to succeed", timeout=180, dep=stack.dev)
