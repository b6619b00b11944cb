"""Every use of a Dagster or uvicorn internal, in one place, held to the pinned versions by a test.

Dagster is pinned exactly (setup.py). Where 1.13 offers no public way to do what the deployment
needs, the internal is wrapped here, and ``tests/unit/test_dagster_internals.py`` checks each
assumption below against the installed version: an upgrade that changes one fails that test with a
message naming it, instead of a sensor, a scrape or the UI's auth misbehaving in production. No
other module of the package imports ``dagster._*``, reads a private attribute of a Dagster object,
queries Dagster's tables without naming them here, or patches uvicorn.

What is public and used as such: ``max_concurrent_runs`` could come from the environment in
``dagster.yaml`` (it is an ``IntSource``), but the sync queues' tag limit cannot (a plain ``int``),
so the run coordinator overrides both the same way, through :func:`replace_run_queue_config`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dagster import AssetMaterialization
from dagster._core.launcher import (
    CheckRunHealthResult,
    LaunchRunContext,
    ResumeRunContext,
    RunLauncher,
    WorkerStatus,
)
from dagster._core.storage.compute_log_manager import CapturedLogContext
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from dagster._core.storage.tags import GRPC_INFO_TAG, WILL_RETRY_TAG
from dagster._serdes import ConfigurableClass, ConfigurableClassData
from dagster._utils.error import SerializableErrorInfo
from dagster_shared.check import CheckError

from optima_pipelines import settings

if TYPE_CHECKING:
    from dagster import DagsterInstance, QueuedRunCoordinator
    from dagster._core.run_coordinator.queued_run_coordinator import RunQueueConfig

__all__ = [
    "DAEMON_HEARTBEAT_INTERVAL_SECONDS",
    "GRPC_INFO_TAG",
    "RUN_EXECUTION_MODULES",
    "RUN_STORAGE_COLUMNS",
    "WILL_RETRY_TAG",
    "CapturedLogContext",
    "CheckError",
    "CheckRunHealthResult",
    "ConfigurableClass",
    "ConfigurableClassData",
    "LaunchRunContext",
    "LocalComputeLogManager",
    "ResumeRunContext",
    "RunLauncher",
    "SerializableErrorInfo",
    "WorkerStatus",
    "configured_storage_module",
    "daemon_statuses",
    "execute_run_in_this_process",
    "fork_run_workers_from_preloaded_server",
    "interrupt_this_process",
    "interrupts_captured",
    "latest_cron_tick",
    "log_materializations",
    "print_run_logs_our_way",
    "registered_instance",
    "remember_schema_probes",
    "replace_run_queue_config",
    "run_dagster_cli",
    "run_dagster_daemon",
    "schedule_tick_evaluated",
    "serve_with_wrapped_app",
    "set_sensor_loop_seconds",
    "share_storage_engine",
    "step_captures_python_logs",
    "store_check_evaluations_in_batches",
    "store_planned_checks_per_partition",
    "store_planned_events_in_batches",
]

# CheckError: what Dagster's commands raise for a bad option (`check.failed`, e.g. `dagster asset
# materialize` of a partitioned asset without --partition); operations/dagster_cli.py prints it as one line.
# WILL_RETRY_TAG ("dagster/will_retry"): Dagster's verdict on a failed run, "true" when the daemon's
# run retries will re-queue it (sensors/requests.py waits for the retry instead of failing the request).
# SerializableErrorInfo: the error of a STEP_FAILURE/RUN_FAILURE event (message, cls_name, cause),
# which sensors/requests.py reads to give a request its run's real cause.
# GRPC_INFO_TAG (".dagster/grpc_info"): the hidden tag where the run launcher records the code server
# that started a run, JSON with "host" (sensors/queue.py: only runs started on this host are checked
# for a dead worker).

# LocalComputeLogManager and CapturedLogContext: Dagster's compute log manager, whose copy of a step's
# output to the process's streams orchestration/compute_logs.py replaces (Dagster exports neither at the
# top level).

# RunLauncher and its types (CheckRunHealthResult, WorkerStatus, LaunchRunContext, ResumeRunContext)
# and ConfigurableClass: what a run launcher named in dagster.yaml must be (orchestration/run_launcher.py).
# Dagster documents custom run launchers but exports only DefaultRunLauncher at the top level.

#: Dagster's run storage tables and the columns /metrics reads with SQL (operations/sql/*.sql): the public
#: API has no way to group runs by a tag, and one count query per (queue, status) would not scale.
RUN_STORAGE_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id", "status", "create_timestamp", "update_timestamp", "start_time", "end_time"),
    "run_tags": ("run_id", "key", "value"),
}


def replace_run_queue_config(config: RunQueueConfig, **changes: Any) -> RunQueueConfig:
    """A copy of the coordinator's run-queue settings with ``changes`` (a NamedTuple in 1.13)."""
    return config._replace(**changes)


def share_storage_engine(storage: Any, engine: Any) -> None:
    """Make the three parts of a ``DagsterPostgresStorage`` (runs, event log, schedules) talk through
    ``engine``: dagster-postgres gives each part a SQLAlchemy engine of its own with a ``NullPool``,
    kept in the private attribute ``_engine`` and used by every statement of the part, so that every
    statement opens a PostgreSQL session (orchestration/storage.py says why that matters here)."""
    for part in (storage._run_storage, storage._event_log_storage, storage._schedule_storage):
        part._engine = engine


def _insert_events(event_log_storage: Any, events: Sequence[Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """Store ``events`` as event-log rows with one INSERT, as dagster-postgres's ``store_event_batch``
    stores materializations (``prepare_insert_event_batch``'s rows): the rows (each event serialized
    once, by ``_event_to_row``) and their storage ids, in the events' order."""
    from dagster._core.storage.event_log.schema import SqlEventLogStorageTable

    rows = [event_log_storage._event_to_row(e) for e in events]
    with event_log_storage._connect() as conn:
        inserted = conn.execute(SqlEventLogStorageTable.insert().values(rows).returning(SqlEventLogStorageTable.c.id))
        return rows, [int(r[0]) for r in inserted]


def store_planned_events_in_batches(storage: Any) -> None:
    """Make the event log of ``storage`` (a ``DagsterPostgresStorage``: its private
    ``_event_log_storage``, a ``PostgresEventLogStorage``) store a batch of
    ASSET_MATERIALIZATION_PLANNED events with one INSERT, as dagster-postgres's ``store_event_batch``
    already stores a batch of materializations; any other event of the batch goes on as before.

    Dagster announces a run's planned materializations when it creates the run: one event per asset
    and partition (the per-partition form is what marks a partition in progress, then failed, in the
    UI's partition grid), sent as one batch (``DagsterEventBatchMetadata``), which dagster-postgres
    stores one event at a time (an INSERT and the asset row's UPDATE each, about 1 ms). The
    re-aggregation sensor's run over 1,000 cabinets × 2 days plans 8,000 of them: the daemon took
    7-15 s to create each such run (2.9 s with this), and the sensor's tick, which creates its runs,
    35-85 s for five (issue 17: its ticks 385 s apart at N = 1,000; bench/reaggregate_tick.py). If
    the asset rows' transaction fails after the INSERT, Dagster's fallback stores the batch again one
    by one, as it does for its own materialization batches. Stored here as dagster-postgres stores a
    materialization batch: the events in one INSERT (``_insert_events``), then each
    asset's row from its last event of the batch (``_store_asset_event``: a planned event sets only
    the asset's ``last_run_id`` and timestamp, so the last one decides). Planned events carry no tags."""
    from dagster import DagsterEventType

    event_log_storage = storage._event_log_storage
    store_rest = event_log_storage.store_event_batch

    def store_event_batch(events: Sequence[Any]) -> None:
        planned = [
            e
            for e in events
            if e.dagster_event is not None
            and e.dagster_event.event_type == DagsterEventType.ASSET_MATERIALIZATION_PLANNED
        ]
        if len(planned) > 1:
            _, ids = _insert_events(event_log_storage, planned)
            last = {e.dagster_event.asset_key: (e, i) for e, i in zip(planned, ids, strict=True)}
            with event_log_storage.index_transaction() as conn:
                for event, event_id in last.values():
                    event_log_storage._store_asset_event(conn, event, event_id)
            stored = {id(e) for e in planned}
            events = [e for e in events if id(e) not in stored]
        if events:
            store_rest(events)

    event_log_storage.store_event_batch = store_event_batch


#: The schema probes of Dagster's storages, per part: each asks PostgreSQL whether a table or a column
#: of a later Dagster migration exists. The schedule storage asks before every tick it writes, updates
#: or purges (``has_instigators_table``: ``Inspector.get_table_names()``, which reads every relation of
#: the database, 12 ms with the warehouse's partitions beside it): 28,130 probes and 285 s of
#: PostgreSQL in 27 minutes at N = 1,000, 69 % of the server's statement time (pg_stat_statements,
#: bench/scale.py, 2026-12-03), more than every query of the syncs together.
SCHEMA_PROBES = {
    "_schedule_storage": (
        "has_instigators_table",
        "_has_instigators_table",
        "_has_asset_daemon_asset_evaluations_table",
        "has_secondary_index_table",
    ),
    "_run_storage": (
        "has_run_stats_index_cols",
        "has_bulk_actions_selector_cols",
        "has_backfill_id_column",
        "has_bulk_action_job_name_column",
        "has_backfill_tags_table",
    ),
    "_event_log_storage": ("has_table",),
}

_PROBED: set[tuple[str, str, tuple[Any, ...]]] = set()


def remember_schema_probes(storage: Any, url: str) -> None:
    """Make the schema probes of ``storage``'s three parts (``SCHEMA_PROBES``) ask PostgreSQL only until
    they are answered yes: a table or column, once there, stays (migrations add them; nothing of a
    running deployment drops Dagster's tables), so the answer is kept for the process and the storage
    URL. A no is never kept: after ``dagster instance migrate`` the next probe sees the new table."""
    for part_name, probes in SCHEMA_PROBES.items():
        part = getattr(storage, part_name)
        for name in probes:
            probe = getattr(part, name)

            def remembered(*args: Any, _probe: Any = probe, _name: str = name) -> Any:
                # A probe's connection argument (the private `_has_*(conn)` forms) is not part of the key.
                key = (url, _name, tuple(a for a in args if isinstance(a, str)))
                if key in _PROBED:
                    return True
                answer = _probe(*args)
                if answer:
                    _PROBED.add(key)
                return answer

            setattr(part, name, remembered)


def store_planned_checks_per_partition(storage: Any) -> None:
    """Make the event log of ``storage`` (its private ``_event_log_storage``) store a planned asset
    check's row of each partition with the planned event of that partition alone.

    Creating a run over a range also announces each asset check of the run as planned: one
    ASSET_CHECK_EVALUATION_PLANNED event per check, whose ``partitions_subset`` names every partition
    of the range. The event itself is stored once, in the event log. Dagster's
    ``SqlEventLogStorage._store_asset_check_evaluation_planned`` then writes one
    ``asset_check_executions`` row per partition, and each row holds the whole event, serialized
    again. So a run over P partitions serializes P keys P times and stores P² keys. The
    re-aggregation sensor's runs over 1,000 cabinets × 2-4 days wrote rows of 77 KB each: 2.2 GB for
    three checks in an hour. They took 7 s of PostgreSQL per INSERT and 44 % of the daemon's CPU
    (pg_stat_statements and py-spy, bench/scale.py at N = 1,000, 2026-12-03).

    The rows written here are Dagster's, column for column, except ``evaluation_event``. It holds
    the planned event with its subset narrowed to the row's one partition. Nothing reads more from
    a planned row: the UI shows its asset, check, run and time. The check's evaluation then replaces
    the event (``_update_asset_check_evaluation``), and the run's full planned event stays in the
    event log, which ``evaluation_event_storage_id`` points at."""
    from dagster._core.definitions.partitions.subset.default import DefaultPartitionsSubset
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
    from dagster._record import copy as copy_record
    from dagster._serdes import serialize_value

    event_log_storage = storage._event_log_storage

    def of_partition(event: Any, planned: Any, partition_key: str | None) -> str:
        if partition_key is None:
            return serialize_value(event)
        one = copy_record(planned, partitions_subset=DefaultPartitionsSubset({str(partition_key)}))
        return serialize_value(event._replace(dagster_event=event.dagster_event._replace(event_specific_data=one)))

    def store_planned(event: Any, event_id: int | None) -> None:
        planned = event.dagster_event.event_specific_data
        partition_keys = planned.partitions_subset.get_partition_keys() if planned.partitions_subset else [None]
        timestamp = event_log_storage._event_insert_timestamp(event)
        with event_log_storage.index_connection() as conn:
            conn.execute(
                AssetCheckExecutionsTable.insert().values(
                    [
                        dict(
                            asset_key=planned.asset_key.to_string(),
                            check_name=planned.check_name,
                            partition=partition_key,
                            run_id=event.run_id,
                            execution_status=AssetCheckExecutionRecordStatus.PLANNED.value,
                            evaluation_event=of_partition(event, planned, partition_key),
                            evaluation_event_timestamp=timestamp,
                            evaluation_event_storage_id=event_id,
                        )
                        for partition_key in partition_keys
                    ]
                )
            )

    event_log_storage._store_asset_check_evaluation_planned = store_planned


def store_check_evaluations_in_batches(storage: Any, batch_size: int | None = None) -> None:
    """Make the event log of ``storage`` (its private ``_event_log_storage``) store a run's partitioned
    asset check evaluations together: held back until the run's next other event (the step's output
    or its end) or ``batch_size`` of them (default: DAGSTER_EVENT_BATCH_SIZE, else ``EVENT_BATCH_SIZE``;
    0 or 1 leaves Dagster's code as it is), then their event rows in one INSERT and their
    ``asset_check_executions`` rows in one UPDATE.

    The mart's checks (assets/rnp.py) yield three evaluations per cabinet and day of a re-aggregation
    run, thousands per run at 1,000 cabinets. Dagster has no batch for them (they are not in
    ``BATCH_WRITABLE_EVENTS``): each was an INSERT of the event, then ``_update_asset_check_evaluation``,
    which serializes the event again and updates its planned row on a connection of its own. That was
    35 % of the run workers' Python time at N = 1,000 (py-spy over every run worker, bench/scale.py,
    2026-12-07). The rows written are Dagster's, column for column; an evaluation with no planned row
    (Dagster's case of a step launched elsewhere) is inserted as Dagster inserts it; if the batch
    fails, its events are stored one by one by Dagster's own code, as Dagster does for its batches.
    Evaluations without a partition or a run go on one by one. Nothing reads a check's row in the same
    step before its next event (a blocking check is judged from the events in the process). A process
    killed between an evaluation and the run's next event loses the evaluations held with its step:
    the run fails (dead-run monitoring), and their checks show as planned and not executed, as they
    would had it died before evaluating them."""
    import sqlalchemy as sa
    from dagster import DagsterEventType
    from dagster._core.errors import DagsterInvariantViolationError
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable

    limit = batch_size or int(os.environ.get("DAGSTER_EVENT_BATCH_SIZE") or EVENT_BATCH_SIZE)
    if limit <= 1:  # batches turned off: Dagster's own code, one by one
        return
    event_log_storage = storage._event_log_storage
    store_one, store_batch = event_log_storage.store_event, event_log_storage.store_event_batch
    held: dict[str, list[Any]] = {}
    lock = threading.Lock()
    table = AssetCheckExecutionsTable

    def held_back(event: Any) -> bool:
        if event.run_id in ("", None) or event.dagster_event is None:
            return False
        if event.dagster_event.event_type != DagsterEventType.ASSET_CHECK_EVALUATION:
            return False
        return event.dagster_event.event_specific_data.partition is not None

    def update(events: list[Any], rows: list[dict[str, Any]], ids: list[int]) -> None:
        values = []
        for n, (event, row, event_id) in enumerate(zip(events, rows, ids, strict=True)):
            evaluation = event.dagster_event.event_specific_data
            target = evaluation.target_materialization_data
            status = (
                AssetCheckExecutionRecordStatus.SUCCEEDED
                if evaluation.passed
                else AssetCheckExecutionRecordStatus.FAILED
            )
            values.append(
                (n, evaluation.asset_key.to_string(), evaluation.check_name, event.run_id, evaluation.partition,
                 status.value, row["event"], row["timestamp"], event_id, target.storage_id if target else None)
            )  # fmt: skip
        v = sa.values(
            sa.column("n", sa.Integer),
            sa.column("asset_key", sa.Text),
            sa.column("check_name", sa.Text),
            sa.column("run_id", sa.Text),
            sa.column("partition", sa.Text),
            sa.column("execution_status", sa.Text),
            sa.column("evaluation_event", sa.Text),
            sa.column("evaluation_event_timestamp", sa.DateTime),
            sa.column("evaluation_event_storage_id", sa.BigInteger),
            sa.column("materialization_event_storage_id", sa.BigInteger),
            name="v",
        ).data(values)
        update = (
            table.update()
            .where(
                table.c.asset_key == v.c.asset_key,
                table.c.check_name == v.c.check_name,
                table.c.run_id == v.c.run_id,
                table.c.partition == v.c.partition,
            )
            .values(  # a VALUES column of NULLs only is text to PostgreSQL: each typed explicitly
                execution_status=v.c.execution_status,
                evaluation_event=v.c.evaluation_event,
                evaluation_event_timestamp=sa.cast(v.c.evaluation_event_timestamp, sa.DateTime),
                evaluation_event_storage_id=sa.cast(v.c.evaluation_event_storage_id, sa.BigInteger),
                materialization_event_storage_id=sa.cast(v.c.materialization_event_storage_id, sa.BigInteger),
            )
            .returning(v.c.n)
        )
        with event_log_storage.index_transaction() as conn:
            updated = [int(r[0]) for r in conn.execute(update)]
            if len(updated) != len(set(updated)):
                raise DagsterInvariantViolationError(
                    "Updated more than one row for an asset check evaluation as a result of duplicate "
                    "AssetCheckPlanned events."
                )
            missing = set(range(len(values))) - set(updated)
            if missing:
                columns = [c.name for c in v.c if c.name != "n"]
                conn.execute(
                    table.insert().values([dict(zip(columns, values[n][1:], strict=True)) for n in sorted(missing)])
                )

    def flush(run_id: str | None) -> None:
        with lock:
            events = held.pop(run_id or "", None)
        if not events:
            return
        ids: list[int] = []
        try:  # as Dagster does when a batch fails: one by one, by its own code, what is not stored yet
            rows, ids = _insert_events(event_log_storage, events)  # each event serialized once
            update(events, rows, ids)
        except Exception as exc:
            sys.stderr.write(f"Exception while storing a batch of asset check evaluations: {exc}\n")
            for n, event in enumerate(events):
                if ids:  # the events are stored: their check rows are not
                    event_log_storage.store_asset_check_event(event, ids[n])
                else:
                    store_one(event)

    def store_event(event: Any) -> None:
        if held_back(event):
            with lock:
                events = held.setdefault(event.run_id, [])
                events.append(event)
                full = len(events) >= limit
            if full:
                flush(event.run_id)
            return
        flush(event.run_id)
        store_one(event)

    def store_event_batch(events: Sequence[Any]) -> None:
        for run_id in {e.run_id for e in events}:
            flush(run_id)
        store_batch(events)

    event_log_storage.store_event = store_event
    event_log_storage.store_event_batch = store_event_batch


#: Events a Dagster process stores in one batch (Dagster reads DAGSTER_EVENT_BATCH_SIZE at every event;
#: 0, its default, stores each event alone). A ranged run of the РНП records a materialization per
#: partition and table, a sweep one per feed and changed day: thousands per run at 1,000 cabinets, at
#: 4.4 ms and 2.7 ms of CPU each alone against 0.6 ms in batches of 1,000 (dagster-postgres's
#: ``store_event_batch``: one INSERT of the events, their tags, the asset's last event).
EVENT_BATCH_SIZE = int(settings.default("DAGSTER_EVENT_BATCH_SIZE"))


def enable_event_batches() -> None:
    """Store the materializations a step records together in batches (``EVENT_BATCH_SIZE``) unless
    the environment sets DAGSTER_EVENT_BATCH_SIZE itself. Called where definitions load, so every
    process that executes runs (run workers, the code server, tests' in-process runs) batches."""
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH_SIZE))


def print_run_logs_our_way() -> None:
    """Every run's log printed by ``logs.console_logger_init`` (once a line, OPTIMA_LOG_FORMAT, with
    the run id, job, queue and cabinet) instead of Dagster's colored console logger. Dagster uses a
    job's own loggers only for the runs whose config names them; every other run gets
    ``default_system_loggers``, which ``context_creation_job`` imported by name: replaced there.
    Called where definitions load (run workers, the spawn launcher's run processes)."""
    from dagster import Field, logger
    from dagster._core.execution import context_creation_job

    from optima_pipelines import logs

    if getattr(context_creation_job.default_system_loggers, "optima", False):
        return

    @logger(
        config_schema={"log_level": Field(str, default_value="INFO", is_required=False)},
        description="A run's log on stderr, once a line, in OPTIMA_LOG_FORMAT (optima_pipelines/logs.py).",
    )
    def console(init_context: Any) -> Any:
        return logs.console_logger_init(init_context.logger_config["log_level"])

    def system_loggers(instance: Any) -> Any:
        level = instance.python_log_level if (instance and instance.python_log_level) else "INFO"
        return [(console, {"log_level": level})]

    system_loggers.optima = True  # type: ignore[attr-defined]
    context_creation_job.default_system_loggers = system_loggers  # type: ignore[attr-defined]


def step_captures_python_logs(logger_name: str) -> bool:
    """Whether a run's step is capturing this logger's lines now (dagster.yaml's managed_python_loggers:
    Dagster's ``DagsterLogHandler`` sits on it while a step executes, and its console logger prints them)."""
    import logging

    from dagster._core.log_manager import DagsterLogHandler

    return any(isinstance(h, DagsterLogHandler) for h in logging.getLogger(logger_name).handlers)


def log_materializations(context: Any, materializations: Sequence[AssetMaterialization]) -> None:
    """``context.log_event`` for each materialization, as one event batch: Dagster batches only the
    per-partition materializations of an asset's output, and ``log_event`` takes no batch. The events
    are built as ``log_event`` builds them (``DagsterEvent.asset_materialization`` on the step's
    context, appended to the op context's ``_events`` so that the step yields them), with
    ``DagsterEventBatchMetadata`` marking the last one: the instance stores them together."""
    from dagster._core.events import DagsterEvent, DagsterEventBatchMetadata, generate_event_batch_id

    if not materializations:
        return
    op_context = getattr(context, "op_execution_context", context)
    step_context = op_context._step_execution_context
    batch_id = generate_event_batch_id()
    last = len(materializations) - 1
    for n, materialization in enumerate(materializations):
        batch = DagsterEventBatchMetadata(batch_id, n == last)
        op_context._events.append(DagsterEvent.asset_materialization(step_context, materialization, batch))


def registered_instance(component: QueuedRunCoordinator | RunLauncher) -> DagsterInstance:
    """The instance a run coordinator or run launcher was registered with (Dagster keeps it as a
    private weak reference, ``MayHaveInstanceWeakref._instance``)."""
    return component._instance


def serve_with_wrapped_app(wrap: Callable[[Any], Any], serve: Callable[[], None]) -> None:
    """Call ``serve`` (dagster-webserver's own command) with every ASGI app it hands to ``uvicorn.run``
    wrapped by ``wrap``. Dagster has no public hook to build its app outside its command (that needs
    ``dagster._core`` workspace contexts), and its command starts the server with ``uvicorn.run(app, ...)``."""
    import uvicorn

    original = uvicorn.run

    def run_wrapped(app: Any, *args: Any, **kwargs: Any) -> Any:
        return original(wrap(app), *args, **kwargs)

    uvicorn.run = run_wrapped  # type: ignore[assignment]
    try:
        serve()
    finally:
        uvicorn.run = original  # type: ignore[assignment]


def set_sensor_loop_seconds(seconds: float) -> None:
    """How often the sensor daemon of this process wakes to evaluate the sensors that are due
    (``MIN_INTERVAL_LOOP_TIME``, 5 s in 1.13, read by its loop on every pass; no setting exists).
    Called by operations/daemon.py before the daemon starts."""
    import dagster._daemon.sensor as sensor_daemon

    sensor_daemon.MIN_INTERVAL_LOOP_TIME = seconds  # type: ignore[assignment]


def run_dagster_daemon() -> None:
    """The ``dagster-daemon`` command itself (its console script calls this ``main``), in this process."""
    from dagster._daemon.cli import main

    main()


#: What a run worker imports before its first run, beyond the definitions: Dagster's run execution
#: (the warm run workers' preload and the forkserver's).
RUN_EXECUTION_MODULES = ("dagster", "dagster._cli.api", "dagster._core.execution.api", "dagster._grpc.impl")


def configured_storage_module() -> str | None:
    """The module of the storage DAGSTER_HOME's dagster.yaml names, as Dagster reads that file (without
    importing the module); None without DAGSTER_HOME, or when the file names its storages one by one.
    Importing it is most of what opening an instance costs: a run worker imports it before forking its
    processes."""
    from dagster._core.instance.ref import InstanceRef

    home = os.environ.get("DAGSTER_HOME")
    storage = InstanceRef.from_dir(home).storage_data if home else None
    return storage.module_name if storage else None


def execute_run_in_this_process(instance: DagsterInstance, run_id: str) -> int:
    """Execute a launched run (status STARTING) here, as ``dagster api execute_run`` does in a fresh
    process: the warm run worker's task (orchestration/run_launcher.py; dagster-celery's own task calls
    the same function). Within :func:`interrupts_captured`, SIGINT interrupts it: the run ends
    CANCELED when it was CANCELING."""
    from dagster._cli.api import _execute_run_command_body

    return _execute_run_command_body(
        run_id=run_id,
        instance=instance,
        write_stream_fn=lambda _event: None,
        set_exit_code_on_failure=False,
    )


def interrupts_captured() -> Any:
    """Dagster's ``capture_interrupts``: inside, SIGINT is recorded and raised as Dagster's interrupt
    at the next point where a run may stop (as in every run worker the code server starts)."""
    from dagster._utils.interrupts import capture_interrupts

    return capture_interrupts()


def interrupt_this_process() -> None:
    """Interrupt the run this process executes, from another thread (what the default launcher's
    termination does to its run worker)."""
    from dagster._utils import send_interrupt

    send_interrupt()


def fork_run_workers_from_preloaded_server(preload: list[str]) -> None:
    """Make every code server created in this process start its run workers from a forkserver that
    imported ``preload`` (Dagster, the definitions) once, instead of the ``spawn`` processes that
    ``DagsterApiServer.__init__`` hard-codes (``self._mp_ctx``), which import everything anew per run.

    The forkserver measured against the warm run workers (bench/orchestration.py --launchers
    default,forkserver,celery; OPTIMA_CODE_SERVER_FORKSERVER=1, ``serve code-server`` then runs
    :mod:`optima_pipelines.operations.forkserver_code_server`)."""
    import multiprocessing

    from dagster._grpc.server import DagsterApiServer

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    original = DagsterApiServer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._mp_ctx = ctx

    DagsterApiServer.__init__ = init  # type: ignore[method-assign]


def run_dagster_cli(argv: list[str]) -> None:
    """Dagster's own command line (``python -m dagster`` is ``dagster._cli.main``) with ``argv``, in this process."""
    from dagster._cli import main

    sys.argv = ["dagster", *argv]
    main()


#: How often each of Dagster's daemons writes its heartbeat (its controller's default; a daemon writes one
#: after an iteration once this long has passed since the last).
DAEMON_HEARTBEAT_INTERVAL_SECONDS = 30


def daemon_statuses(instance: DagsterInstance, tolerance_seconds: float) -> dict[str, Any]:
    """Each daemon the instance requires → its status (``healthy``, ``required``, ``last_heartbeat``),
    healthy when its last heartbeat is younger than ``DAEMON_HEARTBEAT_INTERVAL_SECONDS +
    tolerance_seconds``; errors in a heartbeat are not counted (a sensor's failure is its own tick's).
    ``instance.get_daemon_statuses()`` takes no tolerance and uses Dagster's default of 1,800 s: a
    daemon killed half an hour ago still counted as healthy."""
    from dagster._daemon.controller import get_daemon_statuses

    return dict(
        get_daemon_statuses(
            instance,
            instance.get_required_daemon_types(),
            ignore_errors=True,
            heartbeat_interval_seconds=DAEMON_HEARTBEAT_INTERVAL_SECONDS,
            heartbeat_tolerance_seconds=tolerance_seconds,
        )
    )


def latest_cron_tick(cron: str, now: datetime, timezone: str) -> datetime:
    """The latest time at or before ``now`` that ``cron`` (in ``timezone``) names: Dagster's own cron
    arithmetic, the one its scheduler ticks by (daylight-saving rules included), which 1.13 does not
    export (``dagster._utils.schedules``)."""
    from dagster._utils.schedules import get_latest_completed_cron_tick

    return get_latest_completed_cron_tick(cron, now, timezone)


def schedule_tick_evaluated(instance: DagsterInstance, name: str, at: datetime) -> bool:
    """Whether the schedule ``name`` is not stopped and the daemon has evaluated its tick of ``at``:
    the tick is stored with that time and has ended (launched runs, or skipped). Dagster stores a
    schedule's state once the daemon first ticks it (status DECLARED_IN_CODE, or RUNNING/STOPPED
    once a person toggled it) and each tick with its scheduled time; the instance's methods for
    both are public, their types (InstigatorType, InstigatorStatus, TickStatus) are not exported."""
    from dagster._core.scheduler.instigation import InstigatorStatus, InstigatorType, TickStatus

    for state in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE):
        if state.name != name or state.status == InstigatorStatus.STOPPED:
            continue
        ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=at.timestamp() - 1)
        if any(t.timestamp == at.timestamp() and t.status in (TickStatus.SUCCESS, TickStatus.SKIPPED) for t in ticks):
            return True
    return False
