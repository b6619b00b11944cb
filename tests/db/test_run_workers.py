"""The run workers' heartbeat, the claims that keep a run to one execution, the daemon's lock and the
broker check (operations/workers.py, operations/daemon.py, run monitoring's verdict in orchestration/run_launcher.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dagster import DagsterRun, DagsterRunStatus

from optima_pipelines.db.connection import connect
from optima_pipelines.errors import ConfigError
from optima_pipelines.operations import workers
from optima_pipelines.operations.daemon import DaemonLock, refuse_if_running
from optima_pipelines.orchestration.dagster_internals import WorkerStatus


def heartbeat(database_url: str, env: str, name: str, pid: int) -> workers.Heartbeat:
    return workers.Heartbeat(
        lambda: connect(database_url, f"optima_{env}", autocommit=True), name=name, host="h", pid=pid, every=60
    ).start()


@contextmanager
def two_workers(database_url: str, env: str) -> Iterator[tuple[workers.Heartbeat, workers.Heartbeat]]:
    """run-worker-1@a (pid 101) and run-worker-2@b (pid 202), both stopped on leaving."""
    one = heartbeat(database_url, env, "run-worker-1@a", 101)
    two = heartbeat(database_url, env, "run-worker-2@b", 202)
    try:
        yield one, two
    finally:
        one.stop()
        two.stop()


def age(conn, worker: workers.Heartbeat, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """The worker's last beat ``seconds`` ago (it stopped beating then)."""
    conn.execute(
        "UPDATE run_workers SET beat_at = now() - make_interval(secs => %s) WHERE id = %s", (seconds, worker.id)
    )


def test_a_worker_beats_with_the_runs_it_holds_and_is_dead_once_its_beats_stop(
    warehouse_conn, database_url, optima_env
):
    with two_workers(database_url, optima_env) as (one, two):
        with one.holding("run-x"):
            alive = {w.id: w.runs for w in workers.alive_run_workers(warehouse_conn)}
            assert alive == {one.id: ("run-x",), two.id: ()}
        assert {w.id: w.runs for w in workers.alive_run_workers(warehouse_conn)}[one.id] == ()
        age(warehouse_conn, two, 35)
        assert [w.name for w in workers.alive_run_workers(warehouse_conn)] == ["run-worker-1@a"]
        stopped = workers.stopped_run_workers(warehouse_conn)
        assert [w.name for w in stopped] == ["run-worker-2@b"]
        assert workers.describe_stopped(stopped).startswith("run-worker-2@b (1 process, last beat 3")
    # A worker that stops cleanly leaves no row.
    assert warehouse_conn.execute("SELECT count(*) FROM run_workers").fetchone()[0] == 0


def test_a_run_is_claimed_once_and_a_retry_waits_for_its_first_execution_to_die(
    warehouse_conn, database_url, optima_env
):
    with two_workers(database_url, optima_env) as (first, other):
        with first.holding("A"):
            assert workers.claim_run(warehouse_conn, "A", "A", first.id) is None
            claim = workers.claim_of(warehouse_conn, "A")
            assert claim is not None and claim.alive()
            # The same run delivered again (a broker redelivery, a second daemon's launch): refused.
            again = workers.claim_run(warehouse_conn, "A", "A", other.id)
            assert again is not None and again.other_run_id == "A"
            assert "run-worker-1@a (pid 101) executes it" in again.reason
            # Its retry while it still executes (run monitoring was wrong): refused, naming it.
            retry = workers.claim_run(warehouse_conn, "B", "A", other.id)
            assert retry is not None and retry.other_run_id == "A" and "still executes on" in retry.reason
            # Its worker stops beating (killed, its host gone): the execution is dead, the retry runs.
            age(warehouse_conn, first, 21)
            claim = workers.claim_of(warehouse_conn, "A")
            assert claim is not None and not claim.alive()
            assert claim.why_dead() == "run worker run-worker-1@a (pid 101) that executes it stopped beating 21 s ago"
            with other.holding("B"):
                assert workers.claim_run(warehouse_conn, "B", "A", other.id) is None
                workers.release_run(warehouse_conn, "B", "success")
        # The lineage succeeded: a further retry is not executed.
        late = workers.claim_run(warehouse_conn, "C", "A", other.id)
        assert late is not None and late.reason == "run B, which run C retries, already succeeded"


def test_two_workers_claiming_one_run_at_once_execute_it_once(warehouse_conn, database_url, optima_env):
    beats = [heartbeat(database_url, optima_env, f"w{i}@h", i) for i in range(6)]
    run_id = str(uuid.uuid4())
    results: list[workers.Refusal | None] = []
    start = threading.Barrier(len(beats))

    def claim(beat: workers.Heartbeat) -> None:
        with beat.holding(run_id), connect(database_url, f"optima_{optima_env}", autocommit=True) as conn:
            start.wait()
            results.append(workers.claim_run(conn, run_id, run_id, beat.id))

    threads = [threading.Thread(target=claim, args=(b,)) for b in beats]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for b in beats:
        b.stop()
    assert sum(r is None for r in results) == 1
    assert warehouse_conn.execute("SELECT count(*) FROM run_claims").fetchone()[0] == 1


def test_run_monitoring_reads_the_claim_not_the_brokers_task_state(warehouse_conn, database_url, optima_env):
    """The broker lost the task's state (a Redis restarted empty: the task reads PENDING): a run whose
    worker beats is RUNNING; once the worker stops beating, FAILED naming it."""
    from optima_pipelines.orchestration.run_launcher import WarmRunLauncher

    launcher = WarmRunLauncher()
    beat = heartbeat(database_url, optima_env, "run-worker-1@far", 4242)
    run = DagsterRun(
        job_name="j", run_id=str(uuid.uuid4()), status=DagsterRunStatus.STARTED, tags={"dagster-celery/task_id": "lost"}
    )
    try:
        assert launcher.check_run_worker_health(run).status == WorkerStatus.UNKNOWN  # no claim: the broker's word
        with beat.holding(run.run_id):
            assert workers.claim_run(warehouse_conn, run.run_id, run.run_id, beat.id) is None
            assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
            age(warehouse_conn, beat, 25)
            verdict = launcher.check_run_worker_health(run)
        assert verdict.status == WorkerStatus.FAILED
        assert verdict.msg == "run worker run-worker-1@far (pid 4242) that executes it stopped beating 25 s ago"
    finally:
        beat.stop()
        launcher.dispose()


def test_a_second_daemon_on_one_storage_is_refused_naming_the_first(optima_env):
    from optima_pipelines.db.urls import dagster_storage_url
    from optima_pipelines.settings import load_settings

    settings = load_settings()
    storage = dagster_storage_url(settings.database_url or "", settings.dagster_schema)
    first = DaemonLock(storage)
    first.acquire()
    try:
        with pytest.raises(ConfigError) as refused:
            refuse_if_running(storage)
        message = str(refused.value)
        assert "\n" not in message
        assert (
            message.startswith("another daemon runs on this Dagster storage (") and settings.dagster_schema in message
        )
        assert first.owner in message and message.endswith("stop it first")
        assert first.held()
    finally:
        first.release()
    refuse_if_running(storage)  # free again once the first is gone


def test_the_broker_check_names_an_unreachable_broker_without_its_password(monkeypatch, optima_env):
    assert workers.broker_reachable().ok  # the embedded default: PostgreSQL itself
    monkeypatch.setenv("OPTIMA_RUN_WORKER_BROKER_URL", "redis://:s3cret@127.0.0.1:9/0")
    status = workers.broker_reachable(timeout=1)
    assert not status.ok
    assert status.detail.startswith("broker redis://:***@127.0.0.1:9/0 unreachable: ")
    assert "s3cret" not in status.detail
    monkeypatch.setenv("OPTIMA_RUN_LAUNCHER", "spawn")
    assert workers.broker_reachable().ok


def test_terminating_a_run_whose_worker_died_cancels_it_at_once(
    warehouse_conn, database_url, optima_env, dagster_instance
):
    """Nothing executes it any more, so nothing would ever see CANCELING: it is canceled now, not after
    the cancel timeout (issue 37: a dead host's run held its cabinet until terminated, then 180 s more)."""
    beat = heartbeat(database_url, optima_env, "run-worker-1@gone", 77)
    run = dagster_instance.add_run(DagsterRun(job_name="j", run_id=str(uuid.uuid4()), status=DagsterRunStatus.STARTED))
    try:
        with beat.holding(run.run_id):
            assert workers.claim_run(warehouse_conn, run.run_id, run.run_id, beat.id) is None
        age(warehouse_conn, beat, 30)
        assert dagster_instance.run_launcher.terminate(run.run_id)
    finally:
        beat.stop()
    assert dagster_instance.get_run_by_id(run.run_id).status == DagsterRunStatus.CANCELED
    canceled = [e.message for e in dagster_instance.all_logs(run.run_id) if "Canceled:" in e.message]
    assert canceled and "run-worker-1@gone (pid 77)" in canceled[0], canceled


def test_a_run_worker_refuses_to_start_without_what_its_runs_need(optima_env, warehouse_conn, secret_key, tmp_path):
    """Started without the token key (or with another deployment's), the database or the broker, a run
    worker would take runs that all fail: it refuses, in one line naming what is missing."""
    import os
    import subprocess
    import sys

    from cryptography.fernet import Fernet

    from optima_pipelines.warehouse.cabinets import add_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher

    add_cabinet(warehouse_conn, TokenCipher(secret_key.encode()), "c1", "C1", "eyJhbGciOiJFUzI1NiJ9.eyJzIjoxfQ.c2ln")
    state = tmp_path / "elsewhere"  # another host's state folder: no secret.key in it
    without_key = {k: v for k, v in os.environ.items() if k != "OPTIMA_SECRET_KEY"} | {"OPTIMA_STATE_DIR": str(state)}
    cases = {
        "no usable token key: OPTIMA_SECRET_KEY is not set and ": without_key,
        "the token key (OPTIMA_SECRET_KEY or secret.key) does not decrypt cabinet c1's WB token": {
            **os.environ,
            "OPTIMA_SECRET_KEY": Fernet.generate_key().decode(),
        },
        "database: cannot connect to PostgreSQL at 127.0.0.1:9/": {
            **os.environ,
            "OPTIMA_DATABASE_URL": "postgresql://postgres@127.0.0.1:9/optima",
        },
        "broker redis://127.0.0.1:9/0 unreachable: ": {
            **os.environ,
            "OPTIMA_RUN_WORKER_BROKER_URL": "redis://127.0.0.1:9/0",
        },
    }
    for expected, env in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "optima_pipelines.cli", "serve", "run-worker", "--name", "refused"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: the run worker does not start: "), done.stderr
        assert expected in lines[0], lines[0]
    assert warehouse_conn.execute("SELECT count(*) FROM run_workers").fetchone() == (0,)
    assert not (state / "secret.key").exists()  # no key of its own was made up
