"""The deployment's run launcher: warm run workers fed by Celery (issue 17), or Dagster's default one.

dagster.yaml names :class:`OptimaRunLauncher` in every deployment; ``OPTIMA_RUN_LAUNCHER`` chooses
what it does (settings.py):

- ``celery`` (the default): dagster-celery's ``CeleryRunLauncher`` with our own task. A run is a Celery task taken
  by a long-lived run worker (``optima-pipelines serve run-worker``: a Celery prefork worker whose
  processes imported Dagster and the definitions once, at start). Workers on any number of hosts take
  runs from one broker: that is how the deployment grows past one machine. The broker is Redis in
  production (``OPTIMA_RUN_WORKER_BROKER_URL``) and, unset, kombu's SQLAlchemy transport on Dagster's
  own PostgreSQL schema (no new server); the task states (Celery's result backend) are kept there too.
  bench/orchestration.py measured it against the other two ways (docs/performance.md, bench/JOURNAL.md): a trivial
  run's start under the import-dagster floor, 8× the burst throughput.
- ``spawn``: Dagster's ``DefaultRunLauncher``. The code server starts every run worker as a fresh
  ``spawn`` process that imports Dagster and the definitions before its first line of work (2–4
  CPU-seconds on 2 cores, more than the work of most of our runs).

What the default launcher gets from the code server, the celery path does itself, independent of the
broker (the SQLAlchemy transport has no broadcast, so Celery's ``revoke`` cannot reach a worker):

- termination from the UI: :meth:`WarmRunLauncher.terminate` marks the run CANCELING (or CANCELED when
  no worker took it yet); the worker executing it watches the run's status every second and interrupts
  its own run, which ends CANCELED as with the default launcher;
- at most one execution per run (issue 37): a worker claims a run's execution in PostgreSQL before it
  starts it (``operations/workers.py``: ``run_claims``, under an advisory lock of the run's lineage), so a
  redelivered task, a second launch of the run or a retry started while the first execution lives is
  not executed (a retry is then canceled, naming the run that executes);
- run monitoring: :meth:`WarmRunLauncher.check_run_worker_health` reads the run's claim and its
  worker's heartbeat (``run_workers``, beaten every few seconds by each worker process), not the
  broker's task state: a run whose worker stopped beating (killed, its host gone) is failed and
  dagster.yaml's run_retries re-queues it once; a run whose broker lost its task state (a Redis
  restart) still has a live claim and goes on;
- graceful shutdown: stopping a run worker interrupts the runs it holds like stopping the code server
  does: they are marked failed by run monitoring and re-queued once.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from dagster import DagsterInstance, DagsterRunStatus, DefaultRunLauncher

from optima_pipelines.operations import workers
from optima_pipelines.orchestration.dagster_internals import (
    CheckRunHealthResult,
    ConfigurableClass,
    ConfigurableClassData,
    LaunchRunContext,
    ResumeRunContext,
    RunLauncher,
    WorkerStatus,
    registered_instance,
)
from optima_pipelines.orchestration.queues import TAG_NOT_EXECUTED
from optima_pipelines.settings import load_settings, run_launcher_choice

if TYPE_CHECKING:
    import psycopg
    from celery import Celery
    from dagster import DagsterRun

#: The Celery queue (and routing key prefix) the run workers consume.
RUN_QUEUE = "optima-runs"
#: Our task: execute one Dagster run in this (warm) worker process.
TASK_EXECUTE_RUN = "optima.execute_run"
#: How often a worker looks whether the run it executes was asked to stop.
CANCEL_POLL_SECONDS = 1.0
#: The definitions module a run worker imports at start (``serve run-worker -m``).
PRELOAD_ENV = "OPTIMA_RUN_WORKER_PRELOAD"
BROKER_ENV = "OPTIMA_RUN_WORKER_BROKER_URL"

logger = logging.getLogger(__name__)


def claims_connection(application_name: str = "optima run claims") -> psycopg.Connection:
    """A connection to the warehouse schema, where the run workers beat and claim their runs."""
    from optima_pipelines.db.connection import connect
    from optima_pipelines.errors import ConfigError

    settings = load_settings()
    if not settings.database_url:
        raise ConfigError("OPTIMA_DATABASE_URL is not set: the run workers' heartbeat has no database")
    return connect(
        settings.database_url,
        settings.warehouse_schema,
        autocommit=True,
        connect_timeout=5,
        application_name=application_name,
    )


#: kombu's SQLAlchemy transport polling its table every 0.1 s instead of 1 s (a run's start waits for
#: the next poll). Its own option would be handed to SQLAlchemy's create_engine, so the interval is a
#: subclass's, under an alias of ours. An empty poll is one plain query (``LookingChannel``), not kombu's
#: two ORM queries and a locking read in a transaction: an idle worker cost 1.5 CPU-s a minute, and
#: its PostgreSQL backend 0.3, in polls alone.
SQLA_TRANSPORT_ALIAS = "optima-sqla"
POLL_SECONDS = 0.1


def _register_sqla_transport() -> None:
    from kombu.transport import TRANSPORT_ALIASES

    TRANSPORT_ALIASES.setdefault(
        SQLA_TRANSPORT_ALIAS, "optima_pipelines.orchestration.run_launcher:PollingSQLATransport"
    )


def _polling_sqla_transport() -> type:
    from kombu.transport.sqlalchemy import Channel, Transport
    from kombu.transport.virtual import Empty
    from sqlalchemy import bindparam, literal, select

    class LookingChannel(Channel):
        """kombu's channel, which takes a message only when a plain query saw one visible."""

        _look: Any = None

        def _get(self, queue: str, timeout: Any = None) -> Any:
            if self._look is None:
                message, queues = self.message_cls.__table__, self.queue_cls.__table__
                self._look = (
                    select(literal(1))
                    .select_from(message.join(queues, queues.c.id == message.c.queue_id))
                    .where(queues.c.name == bindparam("queue"), message.c.visible.is_(True))
                    .limit(1)
                )
            try:
                seen = self.session.connection().execute(self._look, {"queue": queue}).first()
            finally:
                self.session.commit()
            if seen is None:
                raise Empty()
            return super()._get(queue)

    LookingChannel.__module__ = __name__
    return type(
        "PollingSQLATransport",
        (Transport,),
        {"Channel": LookingChannel, "polling_interval": POLL_SECONDS, "__module__": __name__},
    )


def __getattr__(name: str) -> Any:
    # The transport class is built on first use: kombu's SQLAlchemy module is imported only with celery.
    if name == "PollingSQLATransport":
        cls = _polling_sqla_transport()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def broker_and_backend(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The Celery broker URL and result backend URL of this deployment.

    Redis (``redis://``): the same server for both. Unset: SQLAlchemy on Dagster's storage URL (its
    schema, ``dagster_<env>``, holds kombu's two queue tables and Celery's task table)."""
    env = os.environ if environ is None else environ
    broker = env.get(BROKER_ENV, "").strip()
    if broker:
        if broker.startswith(("redis://", "rediss://")):
            return broker, broker
        if broker.startswith(("sqla+", f"{SQLA_TRANSPORT_ALIAS}+")):
            return broker, "db+" + broker.partition("+")[2]
        return broker, env.get("OPTIMA_RUN_WORKER_BACKEND_URL", "") or "rpc://"
    storage = env.get("OPTIMA_DAGSTER_STORAGE_URL", "").strip()
    if not storage:
        from optima_pipelines.errors import ConfigError

        raise ConfigError("OPTIMA_RUN_LAUNCHER=celery needs OPTIMA_RUN_WORKER_BROKER_URL or Dagster's storage URL")
    return f"{SQLA_TRANSPORT_ALIAS}+{storage}", "db+" + storage


def make_celery_app(environ: Mapping[str, str] | None = None) -> Celery:
    """The Celery app both sides use: the daemon's launcher sends to it, the run workers consume it."""
    from dagster_celery.make_app import make_app_with_task_routes

    broker, backend = broker_and_backend(environ)
    _register_sqla_transport()
    transport_options: dict[str, Any] = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2}
    app = make_app_with_task_routes(
        task_routes={TASK_EXECUTE_RUN: {"queue": RUN_QUEUE, "routing_key": f"{RUN_QUEUE}.{TASK_EXECUTE_RUN}"}},
        app_args={"broker": broker, "backend": backend, "task_default_queue": RUN_QUEUE},
    )
    from kombu import Queue

    app.conf.task_queues = [Queue(RUN_QUEUE, routing_key=f"{RUN_QUEUE}.#")]
    app.conf.update(
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        # One run per worker process at a time, taken only when a process is free (with the
        # worker's TakeRunsOnlyWhenFree step): a run never waits behind another in a busy worker
        # while an idle one exists.
        worker_prefetch_multiplier=1,
        task_acks_late=False,
        task_track_started=True,
        # Task states are read by run monitoring while the run lives; a week is plenty.
        result_expires=7 * 24 * 3600,
        worker_hijack_root_logger=False,
    )
    return app


def prepare_broker(environ: Mapping[str, str] | None = None) -> None:
    """Create the embedded broker's tables (kombu's queue and message tables, Celery's task table)
    once, under an advisory lock: kombu and Celery create them on first use, and two processes doing
    so at once collide (``CREATE SEQUENCE``). Nothing to do on Redis. Run by ``serve run-worker`` and
    ``serve daemon`` before they start."""
    broker, _backend = broker_and_backend(environ)
    if not broker.startswith(f"{SQLA_TRANSPORT_ALIAS}+"):
        return
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    engine = sa.create_engine(broker.partition("+")[2], poolclass=NullPool)
    try:
        with engine.connect() as lock:
            lock.execute(sa.text("SELECT pg_advisory_lock(hashtext('optima_pipelines.run_broker'))"))
            try:
                app = make_celery_app(environ)
                with app.connection_for_write() as conn:
                    channel = conn.default_channel
                    channel.queue_declare(queue=RUN_QUEUE)
                    # kombu leaves its session in a transaction after finding an existing queue:
                    # this process lives on (it waits for its child), and must hold no locks.
                    channel.session.close()
                app.backend.ResultSession().close()  # type: ignore[attr-defined]
            finally:
                lock.execute(sa.text("SELECT pg_advisory_unlock(hashtext('optima_pipelines.run_broker'))"))
                lock.commit()
    finally:
        engine.dispose()


def prune_broker(older_than: timedelta, environ: Mapping[str, str] | None = None) -> int:
    """Delete what the embedded broker keeps of runs done ``older_than`` ago: kombu's SQLAlchemy
    transport keeps every delivered message (``visible = false``) and Celery's database backend every
    task's state. Redis needs nothing (results expire there). Called by the nightly prune_runs job;
    returns the rows deleted."""
    if run_launcher_choice(environ) != "celery":
        return 0
    broker, _backend = broker_and_backend(environ)
    if not broker.startswith(f"{SQLA_TRANSPORT_ALIAS}+"):
        return 0
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    # kombu stamps a message with the worker's local naive time when it delivers it; Celery stamps
    # a task's end in naive UTC.
    local_cutoff = datetime.now() - older_than
    utc_cutoff = datetime.now(UTC).replace(tzinfo=None) - older_than
    engine = sa.create_engine(broker.partition("+")[2], poolclass=NullPool)
    deleted = 0
    try:
        with engine.begin() as conn:
            if conn.execute(sa.text("SELECT to_regclass('kombu_message')")).scalar() is not None:
                deleted += conn.execute(
                    sa.text("DELETE FROM kombu_message WHERE visible = false AND timestamp < :cutoff"),
                    {"cutoff": local_cutoff},
                ).rowcount
            if conn.execute(sa.text("SELECT to_regclass('celery_taskmeta')")).scalar() is not None:
                deleted += conn.execute(
                    sa.text("DELETE FROM celery_taskmeta WHERE date_done < :cutoff"), {"cutoff": utc_cutoff}
                ).rowcount
    finally:
        engine.dispose()
    return deleted


class WarmRunLauncher(RunLauncher):
    """dagster-celery's launcher, sending our task (see the module's docstring)."""

    def __init__(self) -> None:
        self.celery = make_celery_app()
        self._claims_conn: psycopg.Connection | None = None
        self._claims_lock = threading.Lock()
        super().__init__()

    @property
    def instance(self) -> DagsterInstance:
        return registered_instance(self)

    def launch_run(self, context: LaunchRunContext) -> None:
        from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

        run = context.dagster_run
        self.instance.report_engine_event("Sending the run to the run workers (Celery)", run, cls=self.__class__)
        result = self.celery.send_task(
            TASK_EXECUTE_RUN,
            kwargs={"run_id": run.run_id},
            queue=RUN_QUEUE,
            routing_key=f"{RUN_QUEUE}.{TASK_EXECUTE_RUN}",
        )
        self.instance.add_run_tags(run.run_id, {DAGSTER_CELERY_TASK_ID_TAG: result.task_id})

    def _task_id(self, run: DagsterRun) -> str | None:
        from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

        return run.tags.get(DAGSTER_CELERY_TASK_ID_TAG)

    def claim(self, run_id: str) -> workers.ClaimState | None:
        """The run's execution claim and its worker's heartbeat (one connection of the daemon's, reopened
        when it breaks; a database error is raised: run monitoring then leaves the run as it is)."""
        with self._claims_lock:
            try:
                if self._claims_conn is None or self._claims_conn.closed or self._claims_conn.broken:
                    self._claims_conn = claims_connection("optima run monitoring")
                return workers.claim_of(self._claims_conn, run_id)
            except Exception:
                if self._claims_conn is not None:
                    self._claims_conn.close()
                    self._claims_conn = None
                raise

    def terminate(self, run_id: str) -> bool:
        run = self.instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        try:
            claim = self.claim(run_id)
        except Exception as exc:  # the claims cannot be read now: terminate as if no worker claimed it
            logger.warning("run %s's claim could not be read: %s: %s", run_id, exc.__class__.__name__, exc)
            claim = None
        if claim is not None and claim.released_at is None and not claim.alive():
            # Nothing executes it any more: no worker would ever see CANCELING.
            self.instance.report_run_canceled(run, message=f"Canceled: {claim.why_dead()}.")
            return True
        task_id = self._task_id(run)
        state = self.celery.AsyncResult(task_id).state if task_id else "PENDING"
        if claim is None and state == "PENDING" and run.status in (DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING):
            # No worker took it yet: when one does, Dagster sees CANCELED and does not start it.
            self.instance.report_run_canceled(run, message="Canceled before a run worker took it.")
            return True
        # The worker executing it sees CANCELING within CANCEL_POLL_SECONDS and interrupts the run.
        self.instance.report_run_canceling(run)
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        """A STARTED run's health from its claim: RUNNING while its worker beats and holds it, FAILED
        once it stopped beating (or let the run go without its end). The broker's task state is read
        only for a run no worker claimed (one started before the claims existed)."""
        claim = self.claim(run.run_id)
        if claim is not None:
            if claim.alive():
                return CheckRunHealthResult(WorkerStatus.RUNNING)
            return CheckRunHealthResult(WorkerStatus.FAILED, claim.why_dead())
        task_id = self._task_id(run)
        if task_id is None:
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, "the run has no Celery task and no worker claimed it")
        result = self.celery.AsyncResult(task_id)
        state = result.state
        if state == "SUCCESS":
            return CheckRunHealthResult(WorkerStatus.SUCCESS)
        if state in ("FAILURE", "REVOKED"):
            return CheckRunHealthResult(WorkerStatus.FAILED, f"the run worker's task ended {state}: {result.info!r}")
        if state == "STARTED":
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(WorkerStatus.UNKNOWN, f"task {state}, and no worker claimed the run")

    def get_run_worker_debug_info(self, run: DagsterRun, include_container_logs: bool | None = True) -> str | None:
        try:
            claim = self.claim(run.run_id)
        except Exception as exc:
            return f"its claim could not be read: {exc.__class__.__name__}"
        if claim is not None:
            state = "alive" if claim.alive() else claim.why_dead()
            return f"claimed by {claim.worker()} at {claim.claimed_at:%Y-%m-%d %H:%M:%S %Z}: {state}"
        task_id = self._task_id(run)
        if task_id is None:
            return None
        result = self.celery.AsyncResult(task_id)
        return f"celery task {task_id}: {result.state} {result.info!r}"

    def dispose(self) -> None:
        with self._claims_lock:
            if self._claims_conn is not None:
                self._claims_conn.close()
                self._claims_conn = None


class OptimaRunLauncher(RunLauncher, ConfigurableClass):
    """The launcher dagster.yaml names: the warm one or Dagster's default one, as OPTIMA_RUN_LAUNCHER says."""

    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        self.choice = run_launcher_choice()
        self.inner: RunLauncher = WarmRunLauncher() if self.choice == "celery" else DefaultRunLauncher()
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> OptimaRunLauncher:
        return cls(inst_data=inst_data)

    def register_instance(self, instance: DagsterInstance) -> None:
        super().register_instance(instance)
        self.inner.register_instance(instance)

    def launch_run(self, context: LaunchRunContext) -> None:
        self.inner.launch_run(context)

    def terminate(self, run_id: str) -> bool:
        return self.inner.terminate(run_id)

    def dispose(self) -> None:
        self.inner.dispose()

    def join(self, timeout: int = 30) -> None:
        self.inner.join(timeout)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return self.inner.supports_check_run_worker_health

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        return self.inner.check_run_worker_health(run)

    def get_run_worker_debug_info(self, run: DagsterRun, include_container_logs: bool | None = True) -> str | None:
        return self.inner.get_run_worker_debug_info(run, include_container_logs)

    @property
    def supports_resume_run(self) -> bool:
        return self.inner.supports_resume_run

    def resume_run(self, context: ResumeRunContext) -> None:
        self.inner.resume_run(context)


# -- The run worker's side ---------------------------------------------------------------------------

_worker_instance: DagsterInstance | None = None
#: This worker's Celery node name (``run-worker-1@host``), set in the main process before it forks.
_node_name: str | None = None
#: This process's heartbeat, started when the process starts (``worker_process_init``).
_heartbeat: workers.Heartbeat | None = None


def _instance() -> DagsterInstance:
    """One instance per worker process (DAGSTER_HOME), opened at its first run and kept."""
    global _worker_instance
    if _worker_instance is None:
        _worker_instance = DagsterInstance.get()
    return _worker_instance


def _set_node_name(name: str) -> None:
    global _node_name
    _node_name = name


def heartbeat() -> workers.Heartbeat:
    """This process's heartbeat, started on first use."""
    global _heartbeat
    if _heartbeat is None:
        import socket

        name = _node_name or f"run-worker@{socket.gethostname()}"
        _heartbeat = workers.Heartbeat(
            lambda: claims_connection(f"optima run worker {name}"), name=name, host=name.rpartition("@")[2]
        ).start()
    return _heartbeat


def _stop_heartbeat() -> None:
    global _heartbeat
    if _heartbeat is not None:
        _heartbeat.stop()
        _heartbeat = None


def _outcome(status: DagsterRunStatus | None) -> str:
    if status == DagsterRunStatus.SUCCESS:
        return "success"
    if status in (DagsterRunStatus.CANCELED, DagsterRunStatus.CANCELING):
        return "canceled"
    return "failure"


def _not_executed(instance: DagsterInstance, run: DagsterRun, refusal: workers.Refusal) -> None:
    """What a worker does with a run another execution claimed: nothing to the run itself when that is
    the run (it executes, or ran, elsewhere); a retry of a run that still executes or succeeded is
    canceled, naming that run."""
    logger.warning("%s", refusal.reason)
    instance.report_engine_event(f"This delivery of the run was not executed: {refusal.reason}.", run)
    if refusal.other_run_id != run.run_id and not run.is_finished:
        instance.add_run_tags(run.run_id, {TAG_NOT_EXECUTED: refusal.other_run_id})
        instance.report_run_canceled(run, message=f"Not executed: {refusal.reason}.")


class RunNotSucceeded(Exception):
    """A run this worker executed ended failed or canceled: the task fails with it (Celery must not
    say "succeeded" for a failed run; run monitoring reads the task's state)."""


def execute_run(run_id: str) -> int:
    """Claim the run's execution and execute it in this process, interrupting it while it is asked to stop.

    The claim (operations/workers.py) comes first: a run claimed before, or whose lineage executes elsewhere
    or succeeded, is not executed (:func:`_not_executed`). The process's heartbeat holds the run
    while it executes, which is what run monitoring reads.

    Dagster interrupts a terminated run once (SIGINT, as the code server does to its run workers);
    a step with a retry policy takes that interrupt as a reason to retry, and the run would go on.
    Here the interrupt is repeated every CANCEL_POLL_SECONDS while the run is CANCELING: one that
    lands between two attempts stops the run at the next, and it ends CANCELED."""
    instance = _instance()
    run = instance.get_run_by_id(run_id)
    if run is None:
        logger.warning("run %s does not exist (deleted before a worker took it): nothing to execute", run_id)
        return 0
    beat = heartbeat()
    with beat.holding(run_id):
        refused = beat.call(lambda conn: workers.claim_run(conn, run_id, run.root_run_id or run_id, beat.id))
        if refused is not None:
            _not_executed(instance, run, refused)
            return 0
        try:
            return _execute_claimed(instance, run_id)
        finally:
            ended = instance.get_run_by_id(run_id)
            beat.call(lambda conn: workers.release_run(conn, run_id, _outcome(ended.status if ended else None)))


def _execute_claimed(instance: DagsterInstance, run_id: str) -> int:
    from optima_pipelines.orchestration.dagster_internals import (
        execute_run_in_this_process,
        interrupt_this_process,
        interrupts_captured,
    )

    done = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        while not done.wait(CANCEL_POLL_SECONDS):
            try:
                run = instance.get_run_by_id(run_id)
            except Exception:  # a database hiccup: look again next second
                continue
            if run is not None and run.status == DagsterRunStatus.CANCELING:
                with lock:
                    # Never after the run returned: this process's own SIGINT handler is back then.
                    if done.is_set():
                        return
                    interrupt_this_process()

    watcher = threading.Thread(target=watch, name=f"cancel-watch-{run_id[:8]}", daemon=True)
    with interrupts_captured():
        watcher.start()
        try:
            code = execute_run_in_this_process(instance, run_id)
        finally:
            with lock:
                done.set()
            watcher.join(5)
    run = instance.get_run_by_id(run_id)
    if run is not None and run.status != DagsterRunStatus.SUCCESS:
        raise RunNotSucceeded(f"run {run_id} of {run.job_name} ended {run.status.value}")
    return code


def preload() -> None:
    """Import Dagster's execution machinery, the storage dagster.yaml names and the definitions before the
    worker forks its processes: each process then starts with them imported (opening the instance in a
    pool process cost 0.6 CPU-s when its storage was not imported yet, 0.1 when it was)."""
    from optima_pipelines.orchestration.dagster_internals import RUN_EXECUTION_MODULES, configured_storage_module

    for name in (*RUN_EXECUTION_MODULES, configured_storage_module(), os.environ.get(PRELOAD_ENV)):
        if name:
            importlib.import_module(name)


def _take_runs_only_when_free() -> type:
    """A consumer bootstep: the worker takes a run from the broker only while one of its processes
    is free.

    Celery's prefetch limit counts unacknowledged messages, and a run is acknowledged when it starts
    (``task_acks_late=False``), so a worker of 4 processes running 4 runs could still reserve 4 more
    that wait behind them while another worker sits idle. This is Celery's own
    ``worker_disable_prefetch`` (the channel's ``can_consume`` also asks whether the worker holds
    fewer requests than processes), which Celery 5.7 applies to Redis only; kombu's SQLAlchemy
    transport, the embedded default, asks the same ``can_consume`` before each poll."""
    from celery import bootsteps
    from celery.worker import state

    class TakeRunsOnlyWhenFree(bootsteps.StartStopStep):
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def start(self, c: Any) -> None:
            qos = c.task_consumer.channel.qos
            original = qos.can_consume

            def can_consume() -> bool:
                limit = getattr(c.controller, "max_concurrency", None) or c.pool.num_processes
                return len(state.reserved_requests) < limit and bool(original())

            qos.can_consume = can_consume

    return TakeRunsOnlyWhenFree


def make_worker_app() -> Celery:
    from celery import signals

    from optima_pipelines import logs

    app = make_celery_app()
    # What a run prints keeps its level: Celery would log every line written to stderr as a WARNING.
    app.conf.worker_redirect_stdouts = False
    app.steps["consumer"].add(_take_runs_only_when_free())
    # A failed run fails its task ("raised expected", not "succeeded"); Dagster's run log has the error.
    app.task(name=TASK_EXECUTE_RUN, bind=False, track_started=True, throws=(RunNotSucceeded,))(execute_run)
    signals.celeryd_init.connect(lambda sender=None, **_kwargs: _set_node_name(str(sender)), weak=False)
    # Celery's own lines through the same handler as ours (OPTIMA_LOG_FORMAT), and ours once: with a
    # receiver here Celery installs no root handler of its own.
    signals.setup_logging.connect(lambda **_kwargs: logs.configure_root(), weak=False)
    signals.worker_init.connect(lambda **_kwargs: preload(), weak=False)
    # Each forked process opens its instance (dagster.yaml, the storage and its pool) before its
    # first run, not while a run waits for it, and beats from then on (operations/workers.py): it is a live
    # run worker for run monitoring and /health while it beats.
    signals.worker_process_init.connect(lambda **_kwargs: (_instance(), heartbeat()), weak=False)
    signals.worker_process_shutdown.connect(lambda **_kwargs: _stop_heartbeat(), weak=False)
    return app
