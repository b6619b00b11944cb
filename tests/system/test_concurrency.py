"""The cabinet gate, sync concurrency, priorities and queue hygiene, against the real Dagster daemon.

Everything here runs on a shared `optima-pipelines dev` (daemon, code server, webserver;
tests/system/conftest.py) on PostgreSQL storage and a simulated WB, launches work through every
path a user or the system has, and then reads the run records of the test (created after it got
the deployment): what started when, for which cabinet.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from dagster import DagsterEventType, DagsterRunStatus, RunRecord, RunsFilter

from optima_pipelines.operations.processes import GRPC_WORKSPACE, LOCATION_NAME
from optima_pipelines.orchestration.queues import TAG_CABINET, TAG_LANE, TAG_QUEUE_CLASS, TAG_SKIPPED
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from tests.cli_runner import run_cli
from tests.system.conftest import INTERVAL_S, TIME_SCALE
from tests.system.harness import wait_for
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system

LOCATION = {"repositoryLocationName": "optima_pipelines", "repositoryName": "__repository__"}
#: What these tests run: the orders/sales increments, the user's requests, the cabinet partitions
#: (for the UI backfill) and the queue's own sensors; every other feed stays stopped.
AUTOMATIONS = (
    "cabinet_partitions_sensor",
    "requests_sensor",
    "digitization_increment_sensor",
    "account_busy_sensor",
    "dead_run_sensor",
)
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}

LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}
"""


def records(stack) -> list[RunRecord]:  # type: ignore[no-untyped-def]
    """The runs of the current test: created since it got the shared deployment."""
    since = datetime.fromtimestamp(stack.began, UTC)
    return list(stack.instance.get_run_records(RunsFilter(created_after=since)))


def launch_run(
    dev, job: str, run_config: dict | None = None, tags: dict | None = None, assets: list | None = None
) -> str:  # type: ignore[no-untyped-def]
    params: dict = {"selector": {**LOCATION, "jobName": job}}
    if run_config:
        params["runConfigData"] = run_config
    if tags:
        params["executionMetadata"] = {"tags": [{"key": k, "value": v} for k, v in tags.items()]}
    if assets:
        params["selector"]["assetSelection"] = [{"path": [a]} for a in assets]
    result = dev.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def swept(stack, job: str, outcome: str = "succeeded", after: float | None = None) -> set[str]:  # type: ignore[no-untyped-def]
    """Cabinets a sweep of ``job`` brought to ``outcome`` (finished after the Unix time ``after``; by
    default since the test began)."""
    after = stack.began if after is None else after
    with stack.warehouse() as conn:
        rows = conn.execute(
            "SELECT DISTINCT cabinet_id FROM sweep_outcomes WHERE job = %s AND outcome = %s "
            "AND finished_at > to_timestamp(%s)",
            (job, outcome, after),
        ).fetchall()
    return {r[0] for r in rows}


def user_import(stack, cabinet: str, timeout: float) -> RunRecord:  # type: ignore[no-untyped-def]
    """A user's import of the cabinet's last 2 days, as the backend asks for it: its run, once the
    request succeeded."""
    with stack.warehouse() as conn:
        request_id = outbox.create_request(
            conn, "import-user-feeds", cabinet, {"dateFrom": (today_moscow() - timedelta(days=2)).isoformat()}
        )

    def request_finished() -> bool:
        with stack.warehouse() as conn:
            return outbox.get_request(conn, request_id).status in ("succeeded", "failed")

    wait_for(request_finished, "the user's import to finish", timeout=timeout, dep=stack.dev)
    with stack.warehouse() as conn:
        request = outbox.get_request(conn, request_id)
    assert request.status == "succeeded", request.error
    user = stack.instance.get_run_record_by_id(request.run_id)
    assert user is not None
    return user


def overlapping_calls(sim, cabinet: str) -> list:  # type: ignore[no-untyped-def]
    """Pairs of the cabinet's WB calls that were in flight at once (the simulator's journal)."""
    calls = sorted(sim.journal.calls(cabinet), key=lambda c: c.started)
    return [(a, b) for a, b in itertools.pairwise(calls) if b.started < a.ended - 0.001]


def overlaps(intervals: list[tuple[float, float, str]]) -> list[tuple[str, str]]:
    ordered = sorted(intervals)
    return [(a[2], b[2]) for a, b in itertools.pairwise(ordered) if b[0] < a[1]]


def max_concurrent(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    level = peak = 0
    for _, step in points:
        level += step
        peak = max(peak, level)
    return peak


def busy_cabinets(stack, *ids: str) -> None:  # type: ignore[no-untyped-def]
    stack.add_cabinets(*(CabinetSpec(id=c, products=10, orders_per_day=40, history_days=20) for c in ids))


@pytest.fixture
def busy_stack(shared_stack):  # type: ignore[no-untyped-def]
    """The shared deployment (SYNC_QUEUE_CONCURRENCY=2) with WB's statistics slow."""
    # Every WB statistics call takes a while, so runs are long enough to collide if the gate leaks.
    shared_stack.sim.faults.set("GET statistics/*", latency_s=0.4)
    return shared_stack


def test_one_wb_run_per_cabinet_whoever_launched_it(busy_stack):  # type: ignore[no-untyped-def]
    stack, dev = busy_stack, busy_stack.dev
    busy_cabinets(stack, "g1", "g2", "g3", "g4", "g5")
    stack.start(*AUTOMATIONS)
    today = today_moscow()
    days = [today - timedelta(days=d) for d in (3, 2, 1)]
    # 1. user requests (the backend's path)
    with stack.warehouse() as conn:
        request_ids = [
            outbox.create_request(conn, "import-user-feeds", c, {"dateFrom": (today - timedelta(days=5)).isoformat()})
            for c in ("g1", "g2")
        ]
    # 2. a UI backfill over two cabinets x three days, as the UI launches it (once the cabinet
    # sensor has made the cabinets partitions, as a person would see them in the UI)
    wait_for(
        lambda: {"g3", "g4"} <= set(stack.instance.get_dynamic_partitions("cabinets")),
        "cabinet partitions",
        timeout=120,
        dep=dev,
    )
    backfill = dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": ["wb_orders"]}],
                "partitionNames": [f"{c}|{d}" for c in ("g3", "g4") for d in days],
                "fromFailure": False,
            }
        },
    )["launchPartitionBackfill"]
    assert backfill["__typename"] == "LaunchBackfillSuccess", backfill
    # 3. the Materialize button
    button = launch_run(
        dev,
        "__ASSET_JOB",
        assets=["wb_sales"],
        tags={
            "dagster/partition": f"g5|{days[1]}",
            "dagster/partition/cabinet": "g5",
            "dagster/partition/date": str(days[1]),
        },
    )
    # 4. `dagster job launch` from a shell, through the deployment's workspace (its code location;
    # with `-m optima_pipelines.definitions` the run names a location the daemon does not know, and
    # it fails at dequeue)
    workspace = str(stack.dagster_home / GRPC_WORKSPACE)
    launched = run_cli(
        "dagster", "job", "launch", "-w", workspace, "-l", LOCATION_NAME, "-j", "digitization_increment",
        "--config-json", json.dumps(cabinet_run_config("digitization_increment", "g5")), env=dev.env,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-2000:]
    # 5. the increment sensor sweeps every cabinet by itself

    def done() -> bool:
        recs = records(stack)
        with stack.warehouse() as conn:
            statuses = [outbox.get_request(conn, r).status for r in request_ids]
        backfill_runs = [r for r in recs if r.dagster_run.tags.get("dagster/backfill") == backfill["backfillId"]]
        increments = swept(stack, "digitization_increment_sweep")
        launched = [r for r in recs if r.dagster_run.job_name == "digitization_increment"]  # the shell's
        return (
            all(s in ("succeeded", "failed") for s in statuses)
            and len(backfill_runs) == 6
            and all(r.dagster_run.status in FINISHED for r in backfill_runs)
            and stack.instance.get_run_by_id(button).status in FINISHED
            and {"g1", "g2", "g3", "g4", "g5"} <= increments
            and bool(launched)
            and all(r.dagster_run.status in FINISHED for r in launched)
        )

    def launched_ok() -> bool:
        return all(r.dagster_run.status == DagsterRunStatus.SUCCESS for r in records(stack)
                   if r.dagster_run.job_name == "digitization_increment")  # fmt: skip

    wait_for(done, "every launched run to finish", timeout=300, dep=dev)
    assert launched_ok(), "the run launched from the shell did not succeed"
    with stack.warehouse() as conn:
        assert [outbox.get_request(conn, r).status for r in request_ids] == ["succeeded", "succeeded"]

    finished = [r for r in records(stack) if r.dagster_run.status in FINISHED and r.start_time and r.end_time]
    wb_runs = [r for r in finished if r.dagster_run.job_name != "prune_runs" and r.dagster_run.tags.get("optima/queue") in (
        "digitization-sync",)]  # fmt: skip
    sweeps = [r for r in wb_runs if r.dagster_run.job_name == "digitization_increment_sweep"]
    single = [r for r in wb_runs if r not in sweeps]
    # 2 imports + 6 backfill partitions + the button + the job launch, and the sensor's sweeps.
    assert len(single) >= 2 + 6 + 1 + 1 and sweeps
    # Every single-cabinet run that talked to WB carried its own cabinet, whoever launched it; a
    # sweep carries none (its cabinets take their locks).
    assert all(r.dagster_run.tags.get(TAG_CABINET, "").startswith("g") for r in single), [
        (r.dagster_run.job_name, r.dagster_run.tags)
        for r in single
        if not r.dagster_run.tags.get(TAG_CABINET, "").startswith("g")
    ]
    assert all(TAG_CABINET not in r.dagster_run.tags for r in sweeps)
    by_cabinet: dict[str, list] = defaultdict(list)
    for r in single:
        by_cabinet[r.dagster_run.tags[TAG_CABINET]].append((r.start_time, r.end_time, r.dagster_run.run_id))
    for cabinet, intervals in by_cabinet.items():
        assert overlaps(intervals) == [], f"two runs of {cabinet} were STARTED at once"
    # Sweeps and single runs together: WB never saw two calls of one cabinet in flight at once.
    for cabinet in ("g1", "g2", "g3", "g4", "g5"):
        assert stack.sim.journal.calls(cabinet), f"WB was never asked for {cabinet}"
        assert overlapping_calls(stack.sim, cabinet) == [], f"two units of work talked to WB for {cabinet} at once"
    sync = [(r.start_time, r.end_time) for r in finished if r.dagster_run.tags.get(TAG_QUEUE_CLASS) == "sync"]
    assert max_concurrent(sync) <= 2  # SYNC_QUEUE_CONCURRENCY=2 for the shared deployment
    # The imports, the backfill, the button and the shell's launch are people's runs: the user lane's 2.
    user = [(r.start_time, r.end_time) for r in finished if r.dagster_run.tags.get(TAG_LANE) == "user"]
    assert len(user) >= 2 + 6 + 1 + 1
    assert max_concurrent(user) <= 2
    assert max_concurrent(user) == 2, "the test never loaded the user lane enough to reach its limit"


def test_a_user_request_overtakes_queued_scheduled_runs_and_stale_ones_are_skipped(busy_stack):  # type: ignore[no-untyped-def]
    stack, dev = busy_stack, busy_stack.dev
    busy_cabinets(stack, "u1")
    stack.start(*AUTOMATIONS)
    scheduled = [
        launch_run(
            dev,
            "digitization_increment",
            cabinet_run_config("digitization_increment", "u1"),
            {"optima/trigger": "schedule", "optima/window": f"flood-{i}"},
        )
        for i in range(20)
    ]
    user = user_import(stack, "u1", timeout=240)

    # Of the u1 runs the queue let out after the user's run entered it, the user's came first.
    def event_time(run_id: str, event_type: DagsterEventType) -> float | None:
        logs = stack.instance.all_logs(run_id, of_type=event_type)
        return logs[0].timestamp if logs else None

    enqueued = event_time(user.dagster_run.run_id, DagsterEventType.RUN_ENQUEUED)
    assert enqueued is not None
    dequeued = sorted(
        (at, r.dagster_run.run_id, r.dagster_run.job_name, r.dagster_run.tags.get("dagster/priority"))
        for r in records(stack)
        if r.dagster_run.tags.get(TAG_CABINET) == "u1"
        and (at := event_time(r.dagster_run.run_id, DagsterEventType.RUN_STARTING)) is not None
        and at >= enqueued
    )
    assert dequeued[0][1] == user.dagster_run.run_id, f"let out before the waiting user run: {dequeued[:3]}"

    # Scheduled runs that waited past the 20-s cadence window are cancelled and marked account-busy.
    def flood_settled() -> bool:
        return all(stack.instance.get_run_by_id(r).status in FINISHED for r in scheduled)

    wait_for(flood_settled, "the flooded scheduled runs to settle", timeout=240, dep=dev)
    skipped = [stack.instance.get_run_by_id(r) for r in scheduled]
    skipped = [r for r in skipped if r.tags.get(TAG_SKIPPED) == "account-busy"]
    assert skipped, "no queued-too-long scheduled run was skipped"
    for run in skipped:
        assert run.status == DagsterRunStatus.CANCELED
        messages = [e.message for e in stack.instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT)]
        assert any(m.startswith("skipped: account-busy") for m in messages), messages


def test_a_user_import_does_not_wait_for_the_scheduled_sync_runs_to_end(busy_stack):  # type: ignore[no-untyped-def]
    """Scheduled sync work holds every sync slot for a long time (a sweep over many cabinets would):
    a user's import of another cabinet starts at once in its own lane, while they still run."""
    stack, dev = busy_stack, busy_stack.dev
    busy_cabinets(stack, "b2", "b3", "b4")
    stack.start(*AUTOMATIONS)
    # Every ad call answers after 45 s until the import is done.
    slow = stack.sim.faults.set("GET advert/*", latency_s=45)
    try:
        blockers = [
            launch_run(dev, "ads_sync", cabinet_run_config("ads_sync", cabinet), {"optima/trigger": "schedule"})
            for cabinet in ("b2", "b3")
        ]

        def blocking() -> bool:
            statuses = [stack.instance.get_run_by_id(run_id).status for run_id in blockers]
            return slow.seen >= 2 and all(s == DagsterRunStatus.STARTED for s in statuses)

        wait_for(blocking, "both scheduled ad syncs to hold the sync queues' 2 slots", timeout=120, dep=dev)
        for run_id in blockers:
            tags = stack.instance.get_run_by_id(run_id).tags
            assert (tags[TAG_LANE], tags[TAG_QUEUE_CLASS]) == ("scheduled", "sync")
        user = user_import(stack, "b4", timeout=120)
        assert user.dagster_run.tags[TAG_LANE] == "user"
        assert TAG_QUEUE_CLASS not in user.dagster_run.tags
        # It ran, start to end, while both scheduled runs still held their slots.
        for run_id in blockers:
            blocker = stack.instance.get_run_record_by_id(run_id)
            assert blocker is not None and blocker.start_time is not None
            assert blocker.end_time is None or blocker.end_time > user.end_time, "the import waited for a scheduled run"
    finally:
        stack.sim.faults.remove(slow)
    wait_for(
        lambda: all(stack.instance.get_run_by_id(r).status in FINISHED for r in blockers),
        "the ad syncs",
        timeout=180,
        dep=dev,
    )


@pytest.fixture
def slow_stack(warm_stack):  # type: ignore[no-untyped-def]
    """The warm deployment (the default launcher, room for every run): the sweeps' own pace is under test."""
    return warm_stack


def slow_cabinets(stack, *ids: str) -> None:  # type: ignore[no-untyped-def]
    stack.add_cabinets(*(CabinetSpec(id=c, products=10, orders_per_day=40, history_days=20) for c in ids))
    stack.start(*AUTOMATIONS)


def test_a_killed_sweep_releases_its_cabinets_and_the_next_window_converges(slow_stack):  # type: ignore[no-untyped-def]
    stack, dev = slow_stack, slow_stack.dev
    slow_cabinets(stack, "h1", "h2", "h3")
    slow_sales = stack.sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=120)

    def started_sweep():  # type: ignore[no-untyped-def]
        runs = stack.instance.get_runs(
            RunsFilter(job_name="digitization_increment_sweep", statuses=[DagsterRunStatus.STARTED])
        )
        return runs[0] if runs else None

    wait_for(lambda: started_sweep() is not None, "a started increment sweep", timeout=120, dep=dev)
    victim = started_sweep()
    # Wait until a cabinet of it is inside the slow sales call, then kill the worker.
    wait_for(
        lambda: slow_sales.seen > 0,
        "a cabinet of the sweep to be in its sales call",
        timeout=60,
        dep=dev,
    )
    pid = stack.instance.all_logs(victim.run_id, of_type=DagsterEventType.RUN_START)[0].dagster_event.pid
    os.kill(pid, signal.SIGKILL)
    killed_at, killed_epoch = time.monotonic(), time.time()
    stack.sim.faults.clear()
    # dead_run_sensor ticks every 15 s, but on a loaded 2-core machine a tick can come late.
    wait_for(
        lambda: stack.instance.get_run_by_id(victim.run_id).status == DagsterRunStatus.FAILURE,
        "the killed sweep to fail",
        timeout=150,
        dep=dev,
    )
    # The killed worker's locks went with its connections: the next windows sweep every cabinet.
    wait_for(
        lambda: {"h1", "h2", "h3"} <= swept(stack, "digitization_increment_sweep", after=killed_epoch),
        "every cabinet swept again after the kill",
        timeout=180,
        dep=dev,
    )
    assert time.monotonic() - killed_at < 330

    # What the killed run committed is whole: every cabinet ends with exactly WB's orders and sales.
    def complete() -> bool:
        with stack.warehouse() as conn:
            for cabinet in ("h1", "h2", "h3"):
                ours = {s for (s,) in conn.execute("SELECT srid FROM wb_orders WHERE cabinet_id = %s", (cabinet,))}
                if ours != {o["srid"] for o in stack.sim.truth.orders(cabinet)}:
                    return False
        return True

    wait_for(complete, "every cabinet's orders to equal WB's", timeout=120, dep=dev)


def test_a_cabinet_in_a_long_wb_penalty_does_not_hold_the_others(slow_stack):  # type: ignore[no-untyped-def]
    stack, dev = slow_stack, slow_stack.dev
    slow_cabinets(stack, "p1", "p2", "p3")
    # The cabinets' first sweep (their history) is in before the penalty.
    wait_for(
        lambda: {"p1", "p2", "p3"} <= swept(stack, "digitization_increment_sweep"),
        "a first sweep of each",
        timeout=240,
        dep=dev,
    )
    # Let whatever else is queued drain first (the deployment runs only AUTOMATIONS); the increments
    # themselves come every INTERVAL_S and, on a busy machine, always have one queued.
    wait_for(
        lambda: (
            not [
                r
                for r in stack.instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.QUEUED]))
                if r.job_name != "digitization_increment_sweep"
            ]
        ),
        "the start-up burst of the other syncs to drain",
        timeout=240,
        dep=dev,
    )
    penalty_s = 30  # 30 s here: an increment of p1 and p3 or more
    penalty_simulated_s = penalty_s * TIME_SCALE  # 30 WB minutes at the deployment's time scale
    stack.sim.penalize("p2", "statistics.orders", penalty_simulated_s)
    began = time.time()
    wait_for(lambda: time.time() - began > penalty_s + INTERVAL_S, "the penalty to pass", timeout=120)

    over = began + penalty_s
    sweeps = [
        r
        for r in stack.instance.get_run_records(RunsFilter(job_name="digitization_increment_sweep"))
        if r.end_time and r.end_time >= began
    ]
    assert sweeps and all(r.dagster_run.status == DagsterRunStatus.SUCCESS for r in sweeps), sweeps
    with stack.warehouse() as conn:
        got = conn.execute(
            "SELECT run_id, cabinet_id, outcome, extract(epoch FROM finished_at)::float FROM sweep_outcomes "
            "WHERE run_id = ANY(%s) ORDER BY finished_at",
            ([r.dagster_run.run_id for r in sweeps],),
        ).fetchall()
    # p2 never synced through its penalty: the sweep that met it waited the 30 s out (a pause that
    # short is waited out in the sweep, with the cabinet's lock free) or left it to the resume sensor.
    assert all(at >= over - 1 for _, c, o, at in got if c == "p2" and o == "succeeded" and at >= began), got
    # The sweep that met p2's penalty: p2's outcome in it came once the pause was over.
    met = next((run for run, c, _, at in got if c == "p2" and at >= over - 1), None)
    assert met is not None, f"no sweep met p2's penalty: {got}"
    p2_at = max(at for run, c, _, at in got if run == met and c == "p2")
    # p1 and p3 synced in that same sweep, not held behind p2's pause.
    done = {c: at for run, c, o, at in got if run == met and o == "succeeded" and c != "p2"}
    assert set(done) == {"p1", "p3"} and all(at < p2_at - 5 for at in done.values()), (got, met)

    # After the pause p2 resumes, and ends with exactly WB's data.
    def p2_complete() -> bool:
        with stack.warehouse() as conn:
            ours = {s for (s,) in conn.execute("SELECT srid FROM wb_orders WHERE cabinet_id = 'p2'").fetchall()}
        return ours == {o["srid"] for o in stack.sim.truth.orders("p2")}

    wait_for(p2_complete, "p2 to catch up after its penalty", timeout=120, dep=dev)


@pytest.mark.late
def test_two_environments_running_at_once_never_see_each_other(warm_stack, spawn_stack):  # type: ignore[no-untyped-def]
    """Two deployments side by side on one database, each sweeping its own cabinets: neither's runs,
    cabinets or rows ever name the other's (nor those of the tests before, on either)."""
    warm_stack.add_cabinets(CabinetSpec(id="iw1", products=10, orders_per_day=40, history_days=20))
    spawn_stack.add_cabinets(CabinetSpec(id="is1", products=10, orders_per_day=40, history_days=20))
    for stack in (warm_stack, spawn_stack):
        stack.start("digitization_increment_sensor")
    both = max(warm_stack.began, spawn_stack.began)
    # Two windows in which both environments swept at once.
    for stack, cabinet in ((warm_stack, "iw1"), (spawn_stack, "is1")):
        wait_for(
            lambda s=stack, c=cabinet: len(_sweeps_of(s, c, both)) >= 2,
            f"two sweeps of {cabinet}",
            timeout=240,
            dep=stack.dev,
        )
    for stack, other in ((warm_stack, spawn_stack), (spawn_stack, warm_stack)):
        own = set(stack.cabinet_ids)
        assert not own & set(other.cabinet_ids)
        cabinets = {r.tags.get(TAG_CABINET) for r in stack.instance.get_runs()} - {None}
        for run in stack.instance.get_runs(RunsFilter(job_name="digitization_increment_sweep")):
            cabinets |= set(run.run_config["ops"]["digitization_increment_sweep_op"]["config"]["cabinet_ids"])
        assert cabinets and cabinets <= own, cabinets - own
        with stack.warehouse() as conn:
            ids = {r[0] for r in conn.execute("SELECT id FROM cabinets").fetchall()}
            owners = {r[0] for r in conn.execute("SELECT DISTINCT cabinet_id FROM wb_orders").fetchall()}
        assert ids == own
        assert owners and owners <= own, f"{stack.env} holds orders of {owners - own}"


def _sweeps_of(stack, cabinet: str, after: float) -> list:  # type: ignore[no-untyped-def,type-arg]
    with stack.warehouse() as conn:
        return conn.execute(
            "SELECT run_id FROM sweep_outcomes WHERE cabinet_id = %s AND outcome = 'succeeded' "
            "AND finished_at > to_timestamp(%s)",
            (cabinet, after),
        ).fetchall()


def assert_no_token(*stacks) -> None:  # type: ignore[no-untyped-def]
    """Runs, tags, config, events, logs, compute logs and /metrics of the deployments: no WB token of
    any cabinet they ever held."""
    import httpx

    for stack in stacks:
        places: dict[str, str] = {}
        with stack.warehouse() as conn:
            schema = f"dagster_{stack.env}"
            for table, column in (("event_logs", "event"), ("runs", "run_body"), ("run_tags", "value")):
                rows = conn.execute(f"SELECT {column} FROM {schema}.{table}").fetchall()
                places[f"{schema}.{table}"] = "\n".join(str(r[0]) for r in rows)
            for table in ("requests", "sync_state", "wb_rate_limits", "ops_feed_syncs"):
                rows = conn.execute(f"SELECT row_to_json(t)::text FROM {table} t").fetchall()
                places[table] = "\n".join(r[0] for r in rows)
        places["dev logs"] = "\n".join(p.read_text(errors="replace") for p in stack.tmp.glob("dev-*.log"))
        compute_logs = [p for p in stack.dagster_home.rglob("*") if p.is_file()]
        places["compute logs"] = "\n".join(p.read_text(errors="replace") for p in compute_logs)
        if stack.dev.metrics_url:
            places["/metrics"] = httpx.get(stack.dev.metrics_url + "/metrics", timeout=30).text
        assert len(places[f"{schema}.event_logs"]) > 10_000  # there was a lot to search
        assert stack.tokens, "no cabinet with a token was ever registered here"
        for name, text in places.items():
            for cabinet, token in stack.tokens.items():
                assert token not in text, f"the token of {cabinet} is in {name}"
                assert token.split(".")[2] not in text, f"the token signature of {cabinet} is in {name}"


@pytest.mark.late
def test_no_token_anywhere_after_all_of_it_shared(shared_stack):  # type: ignore[no-untyped-def]
    """After every other test on the shared deployment (before the one that stops it)."""
    assert_no_token(shared_stack)


@pytest.mark.late
def test_no_token_anywhere_after_all_of_it_warm_and_spawn(warm_stack, spawn_stack):  # type: ignore[no-untyped-def]
    """After every other test on the warm and spawn deployments (before the one that stops them)."""
    assert_no_token(warm_stack, spawn_stack)
