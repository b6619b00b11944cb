"""Fault drills (issue 37, issue 36.7): the real deployment, its real daemon and run workers, a Redis broker of
the test's own, and the faults an operator meets: the broker restarted empty mid-run, a second daemon on
the same storage, a run worker's host lost mid-run, every run worker gone. `pytest -m drill` runs them.

One deployment for all of them: `optima-pipelines dev --run-workers 0` (daemon, code server, webserver,
metrics) on a redis-server started here, and run workers started by the test as separate
`optima-pipelines serve run-worker` processes, each in its own process group, so that one can be killed
whole (its main process and every process it forked), as a host that dies takes them all. Each worker
names a host of its own (``--name drill-a@host-a``): liveness must not depend on seeing the process from
the daemon's host.

The engine action they watch is an auto-reply (`autoreply-answer-send`): one WB write (POST
feedbacks/api/v1/feedbacks/answer) after one read of the feedback, which the simulator holds for as
long as a drill needs the run in flight.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis
from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

from optima_pipelines.operations import workers
from optima_pipelines.orchestration.queues import TAG_CABINET, TAG_REQUEST_ID
from optima_pipelines.warehouse import requests as outbox
from tests.system.harness import free_port, only_automations, wait_for
from wb_simulator import CabinetSpec

pytestmark = [pytest.mark.system, pytest.mark.drill]

CABINET = "dr1"
#: The read an auto-reply makes before its write; a drill holds it with the simulator's latency.
FEEDBACK_READ = "GET feedbacks/api/v1/feedback"
ANSWER_WRITE = ("POST", "feedbacks/api/v1/feedbacks/answer")
#: What the issue asks: a dead worker's run failed, and /health failing, within a minute.
WITHIN_S = 60


class OwnRedis:
    """A redis-server of the test's own on a free port, restarted empty when a drill says so."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.folder = folder
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        log = open(self.folder / f"redis-{self.port}.log", "a")
        self.proc = subprocess.Popen(argv, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        wait_for(lambda: self._pings(client), "the test's redis-server to answer", timeout=30)

    @staticmethod
    def _pings(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    def restart_empty(self) -> None:
        """Killed and started again on the same port with nothing in it (no persistence): what a
        restart, an eviction of everything or a failover to an empty replica looks like to Celery."""
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Drill:
    stack: object
    redis: OwnRedis
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start_worker(self, name: str) -> None:
        """``serve run-worker --name NAME@host-NAME -c 2`` (as if on a host of its own) in a process group
        of its own; back once its processes beat."""
        stack = self.stack
        log = open(stack.tmp / f"worker-{name}.log", "a")  # type: ignore[attr-defined]
        self.workers[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "optima_pipelines.cli",
                "serve",
                "run-worker",
                "-c",
                "2",
                "--name",
                f"{name}@host-{name}",
            ],
            env={**os.environ, **stack.environment},  # type: ignore[attr-defined]
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(lambda: name in self.alive(), f"run worker {name} to beat", timeout=180, dep=stack.dev)  # type: ignore[attr-defined]

    def ensure_workers(self, *names: str) -> None:
        for name in names:
            if name not in self.alive():
                self.start_worker(name)

    def alive(self) -> set[str]:
        with self.stack.warehouse() as conn:  # type: ignore[attr-defined]
            return {w.name.partition("@")[0] for w in workers.alive_run_workers(conn)}

    def holder(self, run_id: str) -> str | None:
        """The run worker whose beat lists the run."""
        with self.stack.warehouse() as conn:  # type: ignore[attr-defined]
            for w in workers.alive_run_workers(conn):
                if run_id in w.runs:
                    return w.name.partition("@")[0]
        return None

    def kill_worker(self, name: str) -> None:
        """SIGKILL to the worker's whole process group: nothing of it says goodbye, as when its host dies."""
        proc = self.workers.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for name in list(self.workers):
            self.kill_worker(name)


@pytest.fixture(scope="module")
def drill(stack_factory, tmp_path_factory) -> Iterator[Drill]:  # type: ignore[no-untyped-def]
    own = OwnRedis(tmp_path_factory.mktemp("redis"))
    own.start()
    stack = stack_factory(
        [CabinetSpec(id=CABINET, products=5, orders_per_day=10, history_days=5)],
        time_scale=60,
        extra_env={
            "OPTIMA_RUN_LAUNCHER": "celery",
            "OPTIMA_RUN_WORKER_BROKER_URL": own.url,
            **only_automations("requests_sensor"),
        },
        dev_args=("--run-workers", "0"),
    )
    drill = Drill(stack, own)
    try:
        yield drill
    finally:
        drill.stop()
        own.stop()


def answer_request(drill: Drill, text: str) -> tuple[int, str]:
    """A seller's answer to a new feedback, as the backend asks for it: (request id, feedback id)."""
    sim = drill.stack.sim  # type: ignore[attr-defined]
    nm = sim.truth.cards(CABINET)[0]["nmID"]
    feedback = sim.add_feedback(CABINET, nm, "Пришло быстро", valuation=5)
    with drill.stack.warehouse() as conn:  # type: ignore[attr-defined]
        request_id = outbox.create_request(
            conn, "autoreply-answer-send", CABINET, {"item_id": feedback, "kind": "feedback", "text": text}
        )
    return request_id, feedback


def runs_of(drill: Drill, request_id: int) -> list:  # type: ignore[type-arg]
    instance = drill.stack.instance  # type: ignore[attr-defined]
    return [r.dagster_run for r in instance.get_run_records(RunsFilter(tags={TAG_REQUEST_ID: str(request_id)}))]


def held_run(drill: Drill, request_id: int) -> str:
    """The request's run, once a run worker executes it and its step started (the held read is next)."""
    instance = drill.stack.instance  # type: ignore[attr-defined]

    def started() -> str | None:
        for run in runs_of(drill, request_id):
            if run.status == DagsterRunStatus.STARTED and instance.all_logs(
                run.run_id, of_type=DagsterEventType.STEP_START
            ):
                return run.run_id
        return None

    return wait_for(started, "the request's run to be mid-step", timeout=180, dep=drill.stack.dev)  # type: ignore[attr-defined]


def request_status(drill: Drill, request_id: int) -> outbox.Request:
    with drill.stack.warehouse() as conn:  # type: ignore[attr-defined]
        return outbox.get_request(conn, request_id)


def answers_sent(drill: Drill, feedback: str) -> int:
    """Answers to the feedback that reached WB (the simulator's record of applied writes)."""
    sim = drill.stack.sim  # type: ignore[attr-defined]
    return sum(1 for w in sim.writes if w.kind == "feedback_answer" and w.payload.get("id") == feedback)


def executions(drill: Drill, run_id: str) -> int:
    """How many processes started executing the run (Dagster's "Started process for run" events)."""
    instance = drill.stack.instance  # type: ignore[attr-defined]
    return sum(1 for e in instance.all_logs(run_id) if e.message.startswith("Started process for run"))


def test_a_second_daemon_on_the_same_storage_refuses_to_start_naming_the_first(drill):  # type: ignore[no-untyped-def]
    stack = drill.stack
    env = {**os.environ, **stack.environment}
    cli = [sys.executable, "-m", "optima_pipelines.cli"]
    daemon = subprocess.run(
        [*cli, "serve", "daemon", "--code-server", "127.0.0.1:1", "--wait", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    port = free_port()
    dev = subprocess.run(
        [*cli, "dev", "--port", str(port), "--metrics-port", "0", "--run-workers", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for refused in (daemon, dev):
        assert refused.returncode == 1, refused.stdout + refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, refused.stderr
        assert lines[0].startswith("error: another daemon runs on this Dagster storage (")
        assert f"schema dagster_{stack.env}" in lines[0] and "optima daemon on " in lines[0]
        assert lines[0].endswith("stop it first")
    # The second dev started nothing: no UI on its port; the first deployment goes on.
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2)
    assert stack.dev.proc.poll() is None
    assert stack.dev.graphql("{ version }")["version"]


def test_a_broker_restarted_empty_mid_run_loses_nothing_and_repeats_nothing(drill):  # type: ignore[no-untyped-def]
    """The Redis broker restarted empty while an engine run executes: the run's task state is gone
    (Celery would say PENDING), yet run monitoring leaves the run to its worker, the run completes
    once, and WB gets the answer once."""
    stack = drill.stack
    drill.ensure_workers("drill-a")
    stack.sim.faults.set(FEEDBACK_READ, latency_s=45)
    try:
        request_id, feedback = answer_request(drill, "Спасибо за отзыв!")
        run_id = held_run(drill, request_id)
        task_id = stack.instance.get_run_by_id(run_id).tags["dagster-celery/task_id"]
        assert drill.redis.client().exists(f"celery-task-meta-{task_id}") == 1  # STARTED, as Celery tracks it
        drill.redis.restart_empty()
        assert drill.redis.client().exists(f"celery-task-meta-{task_id}") == 0  # the broker forgot the run
        stack.sim.faults.clear()  # the held read is answered now: the run goes on past the restart
        status = stack.dev.wait_for_run(run_id, timeout=180)
    finally:
        stack.sim.faults.clear()
    assert status == "SUCCESS", stack.instance.get_run_by_id(run_id).status
    wait_for(lambda: request_status(drill, request_id).status == "succeeded", "the request to succeed", dep=stack.dev)
    assert [r.run_id for r in runs_of(drill, request_id)] == [run_id]  # no retry
    assert executions(drill, run_id) == 1
    assert answers_sent(drill, feedback) == 1
    calls = [c for c in stack.sim.journal.calls(CABINET) if (c.method, c.target) == ANSWER_WRITE]
    assert len(calls) == 1


def test_a_run_whose_worker_host_died_is_failed_and_retried_within_a_minute(drill):  # type: ignore[no-untyped-def]
    """A run worker killed whole mid-run (its main process and all it forked, as when its host dies):
    its run stops beating, is failed within a minute naming the worker, retried once on the other
    worker, the cabinet is free again, and WB gets the answer once."""
    stack = drill.stack
    drill.ensure_workers("drill-a", "drill-b")
    stack.sim.faults.set(FEEDBACK_READ, latency_s=600)
    request_id, feedback = answer_request(drill, "Спасибо, что выбрали нас!")
    run_id = held_run(drill, request_id)
    holder = wait_for(lambda: drill.holder(run_id), "the run's worker to beat with it", timeout=30, dep=stack.dev)
    drill.kill_worker(holder)
    killed = time.monotonic()
    stack.sim.faults.clear()
    wait_for(
        lambda: stack.instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE,
        "run monitoring to fail the run of the killed worker",
        timeout=WITHIN_S - (time.monotonic() - killed),
        dep=stack.dev,
    )
    failure = next(
        e.message for e in stack.instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE) if e.message
    )
    assert f"run worker {holder}@host-{holder}" in failure and "stopped beating" in failure, failure

    def retry() -> str | None:
        for run in runs_of(drill, request_id):
            if run.parent_run_id == run_id and run.status == DagsterRunStatus.SUCCESS:
                return run.run_id
        return None

    retried = wait_for(retry, "the retry of the killed run to succeed", timeout=180, dep=stack.dev)
    wait_for(lambda: request_status(drill, request_id).status == "succeeded", "the request to succeed", dep=stack.dev)
    assert len(runs_of(drill, request_id)) == 2  # the run and its one retry
    assert executions(drill, retried) == 1
    assert answers_sent(drill, feedback) == 1
    # The cabinet is free: no run of it holds the cabinet gate.
    busy = [
        r.dagster_run.run_id
        for r in stack.instance.get_run_records(RunsFilter(tags={TAG_CABINET: CABINET}))
        if not r.dagster_run.is_finished
    ]
    assert busy == []


def test_with_every_run_worker_gone_health_fails_naming_them_within_a_minute(drill):  # type: ignore[no-untyped-def]
    stack = drill.stack
    drill.ensure_workers("drill-b")
    health = f"{stack.dev.metrics_url}/health"

    def answer() -> httpx.Response:
        return httpx.get(health, timeout=30)

    ok = answer()
    assert ok.status_code == 200, ok.text
    names = sorted(drill.alive())
    metrics = httpx.get(f"{stack.dev.metrics_url}/metrics", timeout=30).text
    assert f"optima_run_workers_alive {float(len(names))}" in metrics
    assert "optima_broker_reachable 1.0" in metrics
    for name in list(drill.workers):
        drill.kill_worker(name)
    wait_for(lambda: answer().status_code == 503, "/health to answer 503", timeout=WITHIN_S, dep=stack.dev)
    body = answer().json()
    failed = {c["name"]: c["detail"] for c in body["checks"] if not c["ok"]}
    assert list(failed) == ["run workers"], body
    assert failed["run workers"].startswith("no run worker beat within 20 s; stopped: ")
    for name in names:
        assert f"{name}@host-{name}" in failed["run workers"], failed
    metrics = httpx.get(f"{stack.dev.metrics_url}/metrics", timeout=30).text
    assert "optima_run_workers_alive 0.0" in metrics
