"""Whole deployments for system tests, shared: a few `optima-pipelines dev` start-ups serve every test.

Starting a deployment (code server, daemon, webserver, metrics, run workers) takes 40-60 s on two
cores and stopping it 20 s more, so system tests do not start their own. A test asks for one of the
configurations below by its fixture and gets it idle, every sensor and schedule stopped:

==================  =========================================================================
``shared_stack``    the default launcher (celery, one run worker), SYNC_QUEUE_CONCURRENCY=2,
                    the UI behind basic auth (:data:`UI_USER`, :data:`UI_PASSWORD`)
``warm_stack``      ``dev --run-workers 2``; room for 12 runs at once (SYNC_QUEUE_CONCURRENCY=10)
``spawn_stack``     OPTIMA_RUN_LAUNCHER=spawn: the code server starts a process per run (a new
                    Python process of 3-4 CPU-s each: only the tests of that launcher use it)
==================  =========================================================================

Every configuration has its own OPTIMA_ENV on the session's database, its own simulated WB (live
clock, time scale :data:`TIME_SCALE`), the increment sensor's window at :data:`INTERVAL_S` and the
re-aggregation sensor unpaced. What a test does with it, through the :class:`Stack` it gets:

- ``stack.add_cabinets(CabinetSpec(id="x1"), ...)``: the cabinets it works on, in the simulated WB
  and the warehouse with their tokens (ids unique in the deployment: pick a prefix of your own);
  ``stack.add_cabinet_row(id, name, token)`` for a cabinet the simulator does not know.
- ``stack.start("requests_sensor", ...)``: the sensors and schedules it exercises, started through
  GraphQL as an operator starts them in the UI (nothing else runs meanwhile).
- ``stack.sim.faults.set(...)``, ``stack.sim.penalize(...)``: WB's faults, as switches.
- ``stack.dev.graphql(...)``, ``stack.instance``, ``stack.warehouse()``: the deployment's UI, its
  Dagster storage and its warehouse; ``stack.began``: when the test got the deployment (runs and
  rows of earlier tests are still there: read what is the test's own, e.g. created after ``began``
  or of its own cabinets).

After the test, whatever it did, the lease undoes it: the automations it started are stopped, the
simulator's faults, rate limits and penalties cleared, its cabinets archived (no sweep picks them again), and the deployment
waits until no run is queued or in progress (what is left after a grace period is terminated), so
the next test starts on an idle deployment.

A test may stop the deployment (``stack.stop_dev()``, ``stack.start_dev()``, SIGTERM to
``stack.dev.proc``): mark it ``@pytest.mark.stops_deployment``; it then runs last among the tests of
its group (a test after it would start the deployment again: one more start-up).

Scheduling: every test of one deployment group runs in one pytest-xdist worker, together (the
group is derived from the ``*_stack`` fixtures a test uses; ``spawn`` shares the ``warm`` group so
that a test can use both at once; tests/conftest.py's collection hook and scheduler), ordered by
deployment, and a deployment is stopped after the last test of its group that uses it. Each `optima-pipelines
dev` start-up leaves its log, ``dev-<port>.log``, under pytest's basetemp:
``find <basetemp> -name 'dev-*.log' | wc -l`` counts them.
"""

from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas
from optima_pipelines.db.urls import dagster_storage_url
from optima_pipelines.operations.runtime import project_file
from optima_pipelines.orchestration.cadences import cadences
from optima_pipelines.settings import default
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinets import add_cabinet, set_status
from optima_pipelines.warehouse.secrets import TokenCipher
from tests.conftest import TEST_RETENTION_MONTHS, drop_schemas, migrate_by_script
from tests.system.harness import LOCATION, STOP_SENSOR, RunningDeployment, automation_id, running_dev, wait_for
from wb_simulator import CabinetSpec, Simulator, serve

#: The simulated WB's time scale in every shared deployment (WB's pauses are divided by it).
TIME_SCALE = 60
#: The increment sensor's window (DIGITIZATION_INCREMENT_INTERVAL_MS) in every shared deployment.
INTERVAL_S = 20
#: Basic auth of the shared deployment's UI (the harness sends it with every GraphQL call).
UI_USER, UI_PASSWORD = "operator", secrets.token_urlsafe(12)
#: First day of the cabinet × day partitions: the month the tests work in, not two years of columns.
PARTITIONS_START = today_moscow() - timedelta(days=40)
#: How long the lease waits after a test for its runs to end before terminating them.
DRAIN_S = 150
IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


@dataclass(frozen=True)
class Configuration:
    """How one shared deployment is started: its environment (on top of the common one) and dev's options."""

    name: str
    env: dict[str, str]
    dev_args: tuple[str, ...] = ()
    #: The xdist group its tests run in (one worker): tests that use several deployments at once
    #: need them in one group.
    group: str = ""


CONFIGURATIONS = {
    c.name: c
    for c in (
        Configuration(
            "shared",
            {"SYNC_QUEUE_CONCURRENCY": "2", "OPTIMA_UI_USER": UI_USER, "OPTIMA_UI_PASSWORD": UI_PASSWORD},
            group="shared",
        ),
        Configuration(
            "warm",
            # Room in the queue for seven runs and the sensor's sweeps at once: the run workers'
            # eight processes, not the queue, are what the warm tests are about.
            {"OPTIMA_MAX_CONCURRENT_RUNS": "12", "SYNC_QUEUE_CONCURRENCY": "10"},
            dev_args=("--run-workers", "2"),
            group="warm",
        ),
        Configuration("spawn", {"OPTIMA_RUN_LAUNCHER": "spawn"}, group="warm"),
    )
}


def fixture_name(configuration: str) -> str:
    return f"{configuration}_stack"


START_SENSOR = """
mutation($sel: SensorSelector!) { startSensor(sensorSelector: $sel) {
  __typename ... on Sensor { id } ... on PythonError { message } ... on UnauthorizedError { message } } }
"""
START_SCHEDULE = """
mutation($sel: ScheduleSelector!) { startSchedule(scheduleSelector: $sel) {
  __typename ... on ScheduleStateResult { scheduleState { id } } ... on PythonError { message } } }
"""
STOP_SCHEDULE = """
mutation($id: String!) { stopRunningSchedule(id: $id) { __typename ... on PythonError { message } } }
"""
TERMINATE = """
mutation($id: String!) { terminateRun(runId: $id) { __typename } }
"""


@dataclass
class Stack:
    """A running deployment (`optima-pipelines dev`) and the simulated WB it talks to."""

    env: str
    sim: Simulator
    instance: DagsterInstance
    database_url: str
    #: The WB token of every cabinet ever registered here (to prove they never leak).
    tokens: dict[str, str]
    dagster_home: Path
    environment: dict[str, str]
    tmp: Path
    cipher: TokenCipher
    dev: RunningDeployment = field(init=False)
    _dev_cm: Any = field(init=False, default=None)
    #: Options of `optima-pipelines dev` (e.g. ``("--run-workers", "2")``).
    dev_args: tuple[str, ...] = ()
    #: Every cabinet ever registered in this deployment.
    cabinet_ids: list[str] = field(default_factory=list)
    #: When the current test got the deployment (Unix seconds).
    began: float = 0.0
    #: What the current test started and added (undone after it).
    _started: list[tuple[str, str]] = field(default_factory=list)
    _added: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self._dev_cm is not None and self.dev.proc.poll() is None

    def start_dev(self) -> RunningDeployment:
        self._dev_cm = running_dev(self.environment, self.tmp, args=self.dev_args)
        self.dev = self._dev_cm.__enter__()
        return self.dev

    def stop_dev(self) -> None:
        """Stop it as an operator does (SIGINT to `dev`), whatever its runs are doing."""
        if self._dev_cm is not None:
            self._dev_cm.__exit__(None, None, None)
            self._dev_cm = None

    def warehouse(self):  # type: ignore[no-untyped-def]
        return connect(self.database_url, f"optima_{self.env}", autocommit=True)

    # -- what a test sets up ------------------------------------------------------------------------

    def add_cabinets(self, *specs: CabinetSpec) -> list[str]:
        """The cabinets in the simulated WB and in the warehouse (active, with a token of each); archived after the test."""
        for spec in specs:
            self.sim.add_cabinet(spec)
            self.add_cabinet_row(spec.id, spec.id.upper(), self.sim.token(spec.id))
        return [s.id for s in specs]

    def add_cabinet_row(self, cabinet_id: str, name: str, token: str | None, status: str = "active") -> None:
        """A row of the cabinets table only (a cabinet the simulator may not know); archived after the test."""
        assert cabinet_id not in self.cabinet_ids, f"cabinet {cabinet_id} is already in {self.env}: pick another id"
        with self.warehouse() as conn:
            add_cabinet(conn, self.cipher, cabinet_id, name, token, status=status)
        if token:
            self.tokens[cabinet_id] = token
        self.cabinet_ids.append(cabinet_id)
        self._added.append(cabinet_id)

    def start(self, *names: str) -> None:
        """Start these sensors and schedules (names of optima_pipelines/orchestration/cadences.py) through
        GraphQL, as an operator does in the UI; they are stopped after the test."""
        kinds = {c.name: c.kind for c in cadences()}
        for name in names:
            assert name in kinds, f"no such sensor or schedule: {name}"
            if kinds[name] == "cron":
                sel = {**LOCATION, "scheduleName": name}
                result = self.dev.graphql(START_SCHEDULE, {"sel": sel})["startSchedule"]
                assert result["__typename"] == "ScheduleStateResult", result
                self._started.append(("schedule", automation_id(self.dev, "schedule", name)))
            else:
                sel = {**LOCATION, "sensorName": name}
                result = self.dev.graphql(START_SENSOR, {"sel": sel})["startSensor"]
                assert result["__typename"] == "Sensor", result
                self._started.append(("sensor", result["id"]))

    def runs_in_progress(self) -> list:  # type: ignore[type-arg]
        return list(self.instance.get_runs(RunsFilter(statuses=IN_PROGRESS)))

    # -- between tests ------------------------------------------------------------------------------

    def _begin(self) -> None:
        self.wait_idle("the runs of the test before")
        self.began = time.time()

    def _end(self) -> None:
        """Undo what the test did (its automations, faults, cabinets) and drain the queue."""
        if not self.running:
            self._started.clear()
            self.sim.faults.clear()
            self._added.clear()
            return
        for kind, started_id in self._started:
            if kind == "sensor":
                self.dev.graphql(STOP_SENSOR, {"id": started_id})
            else:
                self.dev.graphql(STOP_SCHEDULE, {"id": started_id})
        self._started.clear()
        self.sim.faults.clear()
        self.sim.limiter.clear()  # WB's rate limits and penalties (sim.penalize) start afresh
        with self.warehouse() as conn:
            for cabinet_id in self._added:
                set_status(conn, cabinet_id, "archived")
        self._added.clear()
        self.wait_idle("the runs the test left")

    def wait_idle(self, what: str) -> None:
        """Until no run is queued or in progress; what is left after DRAIN_S is terminated."""
        if not self.running:
            return
        try:
            wait_for(lambda: not self.runs_in_progress(), f"{what} to end", timeout=DRAIN_S)
        except AssertionError:
            for run in self.runs_in_progress():
                self.dev.graphql(TERMINATE, {"id": run.run_id})
            wait_for(lambda: not self.runs_in_progress(), f"{what} to end once terminated", timeout=120, dep=self.dev)


class Deployments:
    """The session's shared deployments, started on first use and stopped when no test needs them."""

    def __init__(self, database_url: str, secret_key: str, migration_script: str, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
        self.database_url = database_url
        self.secret_key = secret_key
        self.migration_script = migration_script
        self.tmp_path_factory = tmp_path_factory
        self.stacks: dict[str, Stack] = {}
        self.servers: dict[str, Any] = {}

    def get(self, name: str) -> Stack:
        """The running deployment of this configuration (started now if it is not yet)."""
        stack = self.stacks.get(name) or self._create(CONFIGURATIONS[name])
        if not stack.running:
            stack.start_dev()
        return stack

    @contextmanager
    def lease(self, name: str) -> Iterator[Stack]:
        """The deployment for one test: idle on entry, what the test did undone on exit."""
        stack = self.get(name)
        stack._begin()
        try:
            yield stack
        finally:
            stack._end()

    def _create(self, config: Configuration, time_scale: float = TIME_SCALE) -> Stack:
        env = f"sys{secrets.token_hex(4)}"
        tmp: Path = self.tmp_path_factory.mktemp(f"{config.name}-{env}")
        url = self.database_url
        migrate_by_script(url, f"optima_{env}", self.migration_script)
        ensure_schemas(url, f"dagster_{env}")
        # The simulated clock follows real time: the daemon's runs happen in real time.
        sim = Simulator(seed=21, cabinets=[], time_scale=time_scale)
        server = serve(sim)
        base_url = server.__enter__()
        automations = ",".join(c.name for c in cadences())
        environment = {
            "OPTIMA_DATABASE_URL": url,
            "OPTIMA_ENV": env,
            "OPTIMA_SECRET_KEY": self.secret_key,
            "OPTIMA_STATE_DIR": str(tmp / "state"),
            "OPTIMA_DAGSTER_STORAGE_URL": dagster_storage_url(url, f"dagster_{env}"),
            "OPTIMA_WB_BASE_URL": base_url,
            "OPTIMA_WB_TIME_SCALE": str(TIME_SCALE),
            "OPTIMA_PARTITION_RETENTION_MONTHS": TEST_RETENTION_MONTHS,
            "OPTIMA_PARTITIONS_START": PARTITIONS_START.isoformat(),
            "DIGITIZATION_INCREMENT_INTERVAL_MS": str(INTERVAL_S * 1000),
            "OPTIMA_REAGGREGATE_EVERY_SECONDS": "0",
            # Everything starts stopped: each test starts what it exercises (Stack.start).
            "OPTIMA_AUTOMATIONS_STOPPED": automations,
            **config.env,
        }
        home = tmp / "instance_home"
        home.mkdir()
        shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
        # The test's own view of the deployment's Dagster storage (dagster.yaml reads the env).
        with pytest.MonkeyPatch.context() as mp:
            for key, value in {**environment, "DAGSTER_HOME": str(home)}.items():
                mp.setenv(key, value)
            instance = DagsterInstance.get()
        stack = Stack(
            env,
            sim,
            instance,
            url,
            {},
            tmp / "state" / "dagster" / env,
            environment,
            tmp,
            TokenCipher(self.secret_key.encode()),
            dev_args=config.dev_args,
        )
        self.stacks[config.name] = stack
        self.servers[config.name] = server
        return stack

    def release_unneeded(self, item: pytest.Item) -> None:
        """Stop the deployments no later test of this group (none, at the end) uses."""
        for name, stack in self.stacks.items():
            if not needed_after(item, name):
                stack.stop_dev()

    def close(self) -> None:
        for name, stack in self.stacks.items():
            stack.stop_dev()
            self.servers[name].__exit__(None, None, None)
            stack.instance.dispose()
            drop_schemas(self.database_url, f"optima_{stack.env}", f"dagster_{stack.env}")
        self.stacks.clear()


_POOL: list[Deployments] = []


@pytest.fixture(scope="session")
def deployments(database_url: str, secret_key: str, migration_script: str, tmp_path_factory) -> Iterator[Deployments]:  # type: ignore[no-untyped-def]
    """The pool of shared deployments (use the ``*_stack`` fixtures rather than this)."""
    pool = Deployments(database_url, secret_key, migration_script, tmp_path_factory)
    _POOL.append(pool)
    try:
        yield pool
    finally:
        _POOL.remove(pool)
        pool.close()


def _stack_fixture(name: str):  # type: ignore[no-untyped-def]
    def fixture(deployments: Deployments) -> Iterator[Stack]:
        with deployments.lease(name) as stack:
            yield stack

    fixture.__doc__ = f"The shared {name!r} deployment for one test (see the module's docstring)."
    return pytest.fixture(name=fixture_name(name))(fixture)


@pytest.fixture(scope="module")
def stack_factory(database_url: str, secret_key: str, migration_script: str, tmp_path_factory) -> Iterator:  # type: ignore[no-untyped-def]
    """A deployment of a configuration of its own, for a module whose tests need one no shared
    deployment has (the drills: a Redis broker of the test's own, cadences scaled, JSON logs); torn
    down after the module. ``build(cabinets, time_scale=60, extra_env=..., dev_args=...)`` registers
    the cabinets, starts `dev` and returns its :class:`Stack`; every automation runs unless
    ``extra_env`` stops some (``harness.only_automations``)."""
    pool = Deployments(database_url, secret_key, migration_script, tmp_path_factory)

    def build(
        cabinets: list[CabinetSpec],
        *,
        time_scale: float = TIME_SCALE,
        extra_env: dict[str, str] | None = None,
        dev_args: tuple[str, ...] = (),
    ) -> Stack:
        name = f"own{len(pool.stacks)}"
        # The deployment's own settings, not the shared ones: the production cadences and pacing.
        env = {
            "OPTIMA_AUTOMATIONS_STOPPED": "",
            "OPTIMA_WB_TIME_SCALE": str(time_scale),
            "DIGITIZATION_INCREMENT_INTERVAL_MS": default("DIGITIZATION_INCREMENT_INTERVAL_MS"),
            "OPTIMA_REAGGREGATE_EVERY_SECONDS": default("OPTIMA_REAGGREGATE_EVERY_SECONDS"),
            **(extra_env or {}),
        }
        stack = pool._create(Configuration(name, env, dev_args=dev_args), time_scale=time_scale)
        stack.add_cabinets(*cabinets)
        stack._added.clear()  # the module's cabinets: not archived between its tests
        stack.start_dev()
        return stack

    try:
        yield build
    finally:
        pool.close()


shared_stack = _stack_fixture("shared")
warm_stack = _stack_fixture("warm")
spawn_stack = _stack_fixture("spawn")


def deployments_of(item: pytest.Item) -> list[str]:
    """The shared deployments a test uses (by its fixtures)."""
    names = getattr(item, "fixturenames", ())
    return [name for name in CONFIGURATIONS if fixture_name(name) in names]


def group_of(item: pytest.Item) -> str | None:
    """The xdist group of a test: that of the shared deployments it uses (None: it uses none)."""
    groups = {CONFIGURATIONS[name].group for name in deployments_of(item)}
    assert len(groups) <= 1, f"{item.nodeid} uses deployments of several groups {groups}: give them one"
    return groups.pop() if groups else None


#: The session's tests in the order they run (a worker runs a group's tests in this order).
_ORDER: list[pytest.Item] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    _ORDER[:] = session.items


def needed_after(item: pytest.Item, configuration: str) -> bool:
    """Whether a test after ``item`` in its group uses this deployment (its worker runs them next)."""
    group = group_of(item)
    if group is None or item not in _ORDER:
        return False
    later = _ORDER[_ORDER.index(item) + 1 :]
    return any(group_of(t) == group and configuration in deployments_of(t) for t in later)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    yield
    for pool in _POOL:
        pool.release_unneeded(item)
