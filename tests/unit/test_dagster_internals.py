"""The contract with the pinned Dagster: what optima_pipelines/orchestration/dagster_internals.py relies on still holds.

A Dagster upgrade that changes one of these fails here, with the assumption named, rather than in a
sensor, a scrape or the UI's basic auth in production.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from optima_pipelines.orchestration import dagster_internals as internals

PACKAGE = Path(internals.__file__).parents[1]  # the package: orchestration/ is one below it


def test_the_tags_we_read_are_the_ones_dagster_writes() -> None:
    from dagster._core.launcher import default_run_launcher
    from dagster._daemon.auto_run_reexecution import auto_run_reexecution

    assert internals.WILL_RETRY_TAG == "dagster/will_retry"
    assert "WILL_RETRY_TAG" in inspect.getsource(auto_run_reexecution), (
        "Dagster's run retries no longer set WILL_RETRY_TAG: sensors/requests.py cannot tell a run that "
        "will be retried from a dead one"
    )
    assert internals.GRPC_INFO_TAG == ".dagster/grpc_info"
    assert "GRPC_INFO_TAG" in inspect.getsource(default_run_launcher), (
        "the default run launcher no longer records the code server in GRPC_INFO_TAG: "
        "sensors/queue.py cannot tell which runs this host started"
    )


def test_the_run_queue_settings_can_be_replaced() -> None:
    from dagster._core.run_coordinator.queued_run_coordinator import RunQueueConfig

    config = RunQueueConfig(max_concurrent_runs=6, tag_concurrency_limits=[{"key": "k", "limit": 1}])
    changed = internals.replace_run_queue_config(config, max_concurrent_runs=9, tag_concurrency_limits=[])
    assert (changed.max_concurrent_runs, changed.tag_concurrency_limits) == (9, [])
    assert config.max_concurrent_runs == 6, "the coordinator's own settings must not change in place"


def test_a_coordinator_and_a_launcher_give_back_the_instance_they_were_registered_with() -> None:
    from dagster import DagsterInstance, DefaultRunLauncher, QueuedRunCoordinator

    with DagsterInstance.ephemeral() as instance:
        for component in (QueuedRunCoordinator(), DefaultRunLauncher()):
            component.register_instance(instance)
            assert internals.registered_instance(component) is instance, type(component).__name__


def test_the_run_storage_columns_metrics_read_exist_and_are_all_declared() -> None:
    from dagster._core.storage.runs.schema import RunsTable, RunTagsTable

    tables = {"runs": RunsTable, "run_tags": RunTagsTable}
    for table, columns in internals.RUN_STORAGE_COLUMNS.items():
        missing = set(columns) - set(tables[table].c.keys())
        assert not missing, f"Dagster's {table} table has no column(s) {sorted(missing)} that /metrics reads"

    used: dict[str, set[str]] = {"runs": set(), "run_tags": set()}
    for path in sorted((PACKAGE / "operations" / "sql").glob("*.sql")):
        text = path.read_text()
        for table, alias in re.findall(r"\{(runs|run_tags)\}\s+(?:AS\s+)?(\w+)", text):
            used[table] |= set(re.findall(rf"\b{alias}\.(\w+)", text))
    assert used["runs"], "no query reads Dagster's runs table: the pattern above no longer matches operations/sql"
    for table, columns in used.items():
        undeclared = columns - set(internals.RUN_STORAGE_COLUMNS[table])
        assert not undeclared, f"operations/sql reads {table}.{sorted(undeclared)}: declare them in RUN_STORAGE_COLUMNS"


def test_the_webserver_command_starts_its_app_with_uvicorn_run() -> None:
    from dagster_webserver import cli

    assert re.search(r"\buvicorn\.run\(", inspect.getsource(cli)), (
        "dagster-webserver no longer calls uvicorn.run: the UI's basic auth would not wrap its app"
    )


def test_the_wrapped_app_is_what_uvicorn_serves_and_uvicorn_is_restored() -> None:
    import uvicorn

    original = uvicorn.run
    served: list[object] = []

    def serve() -> None:
        # What dagster-webserver's command does, minus the server: hand its app to uvicorn.run.
        uvicorn.run("the app")  # type: ignore[arg-type]

    try:
        uvicorn.run = lambda app, *a, **kw: served.append(app)  # type: ignore[assignment]
        patched = uvicorn.run
        internals.serve_with_wrapped_app(lambda app: ("wrapped", app), serve)
        assert served == [("wrapped", "the app")]
        assert uvicorn.run is patched
    finally:
        uvicorn.run = original  # type: ignore[assignment]


def test_no_other_module_uses_a_dagster_internal() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "dagster_internals.py":
            continue
        text = path.read_text()
        if re.search(r"^\s*(from|import) dagster\._", text, re.M) or re.search(r"\buvicorn\.run\s*=", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert not offenders, f"Dagster/uvicorn internals outside orchestration/dagster_internals.py: {offenders}"


@pytest.mark.parametrize("name", internals.__all__)
def test_every_name_the_module_exports_exists(name: str) -> None:
    assert hasattr(internals, name)


def test_the_sensor_loop_sleeps_for_the_constant_we_set() -> None:
    import dagster._daemon.sensor as sensor_daemon

    assert sensor_daemon.MIN_INTERVAL_LOOP_TIME == 5 or sensor_daemon.MIN_INTERVAL_LOOP_TIME == 1
    source = inspect.getsource(sensor_daemon.execute_sensor_iteration_loop)
    assert "MIN_INTERVAL_LOOP_TIME - loop_duration" in source, (
        "Dagster's sensor loop no longer sleeps for MIN_INTERVAL_LOOP_TIME: operations/daemon.py's 1-s sensor loop "
        "(set_sensor_loop_seconds) has no effect"
    )
    original = sensor_daemon.MIN_INTERVAL_LOOP_TIME
    try:
        internals.set_sensor_loop_seconds(1)
        assert sensor_daemon.MIN_INTERVAL_LOOP_TIME == 1
    finally:
        sensor_daemon.MIN_INTERVAL_LOOP_TIME = original


def test_the_code_server_starts_run_workers_from_the_context_we_replace() -> None:
    from dagster._grpc import server

    init = inspect.getsource(server.DagsterApiServer.__init__)
    assert 'self._mp_ctx = multiprocessing.get_context("spawn")' in init, (
        "DagsterApiServer no longer keeps its run workers' multiprocessing context in _mp_ctx: "
        "fork_run_workers_from_preloaded_server (OPTIMA_CODE_SERVER_FORKSERVER) has no effect"
    )
    assert "self._mp_ctx.Process(" in inspect.getsource(server.DagsterApiServer), (
        "DagsterApiServer no longer starts run workers with _mp_ctx.Process"
    )


def test_the_warm_worker_executes_runs_with_dagsters_own_run_command() -> None:
    from dagster._cli import api, main  # noqa: F401 - run_dagster_cli calls main
    from dagster._utils import send_interrupt  # noqa: F401
    from dagster._utils.interrupts import capture_interrupts  # noqa: F401

    params = list(inspect.signature(api._execute_run_command_body).parameters)
    assert params == ["run_id", "instance", "write_stream_fn", "set_exit_code_on_failure"], (
        f"dagster api execute_run's body changed its signature ({params}): execute_run_in_this_process "
        "(the warm run workers' task) must follow"
    )


def test_dagster_celery_is_the_release_of_the_dagster_pin() -> None:
    import dagster
    import dagster_celery
    from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

    major, minor = dagster.__version__.split(".")[:2]
    assert dagster_celery.__version__.split(".")[:2] == ["0", str(int(minor) + 16)], (
        f"dagster-celery {dagster_celery.__version__} is not the release of dagster {dagster.__version__}"
    )
    assert major == "1"
    assert DAGSTER_CELERY_TASK_ID_TAG == "dagster-celery/task_id"


def test_the_postgres_storage_parts_talk_through_the_engine_we_hand_them() -> None:
    from dagster_postgres import DagsterPostgresStorage
    from dagster_postgres.event_log import PostgresEventLogStorage
    from dagster_postgres.run_storage import PostgresRunStorage
    from dagster_postgres.schedule_storage import PostgresScheduleStorage

    init = inspect.getsource(DagsterPostgresStorage.__init__)
    for part in ("self._run_storage", "self._event_log_storage", "self._schedule_storage"):
        assert part in init, f"DagsterPostgresStorage no longer keeps {part}: share_storage_engine cannot reach it"
    for cls in (PostgresRunStorage, PostgresEventLogStorage, PostgresScheduleStorage):
        method = next(getattr(cls, name) for name in ("connect", "_connect") if name in vars(cls))
        assert "create_pg_connection(self._engine)" in inspect.getsource(method), (
            f"{cls.__name__}.{method.__name__} no longer connects through self._engine: orchestration/storage.py's "
            "pooled engine would be bypassed and every statement would open a PostgreSQL session again"
        )


def test_a_steps_logged_events_are_the_list_we_append_to_and_dagster_batches_by_its_setting() -> None:
    from dagster import OpExecutionContext
    from dagster._core.events import DagsterEvent
    from dagster._core.instance.methods import event_methods

    log_event = inspect.getsource(OpExecutionContext.log_event)
    assert "self._events.append(" in log_event and "self._step_execution_context" in log_event, (
        "OpExecutionContext.log_event no longer appends to _events built on _step_execution_context: "
        "log_materializations must build its events another way"
    )
    assert "batch_metadata" in inspect.signature(DagsterEvent.asset_materialization).parameters
    assert 'os.getenv("DAGSTER_EVENT_BATCH_SIZE"' in inspect.getsource(event_methods), (
        "Dagster no longer reads DAGSTER_EVENT_BATCH_SIZE: enable_event_batches has no effect"
    )


def test_a_planned_event_is_stored_as_an_event_row_and_its_assets_row_only() -> None:
    """store_planned_events_in_batches does for a batch what dagster-postgres's store_event does for
    one planned event: the event's row, then the asset's row; if store_event starts doing more for a
    planned event (tags, a partition table), the batch would skip it."""
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
    from dagster_postgres.event_log import PostgresEventLogStorage

    for name in ("_event_to_row", "_store_asset_event", "index_transaction", "_connect"):
        assert callable(getattr(PostgresEventLogStorage, name, None)), f"PostgresEventLogStorage.{name} is gone"
    assert "self._event_to_row(event) for event in events" in inspect.getsource(
        SqlEventLogStorage.prepare_insert_event_batch
    ), "Dagster's batch rows no longer come from _event_to_row: _insert_events writes other rows"
    store_event = inspect.getsource(PostgresEventLogStorage.store_event)
    assert "self._store_asset_event_tags(conn, [event], [event_id])" in store_event
    assert "self._store_asset_event(conn, event, event_id)" in store_event
    tags = inspect.getsource(SqlEventLogStorage._tags_for_asset_event)
    assert "is_step_materialization" in tags and "is_asset_observation" in tags and "planned" not in tags, (
        "asset event tags no longer come from materializations and observations only"
    )
    values = inspect.getsource(SqlEventLogStorage._get_asset_entry_values)
    assert 'entry_values.update({"last_run_id": event.run_id})' in values, (
        "a planned event no longer sets just the asset's last_run_id: the batch's last event per asset may not decide"
    )


def test_a_planned_check_is_stored_by_the_method_we_replace_with_the_columns_we_write() -> None:
    """store_planned_checks_per_partition replaces Dagster's _store_asset_check_evaluation_planned;
    if Dagster stops calling it, or writes other columns, ours would be bypassed or write too little."""
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    dispatch = inspect.getsource(SqlEventLogStorage.store_asset_check_event)
    assert "self._store_asset_check_evaluation_planned(event, event_id)" in dispatch, (
        "Dagster no longer stores a planned check through _store_asset_check_evaluation_planned"
    )
    planned = inspect.getsource(SqlEventLogStorage._store_asset_check_evaluation_planned)
    written = set(re.findall(r"^\s+(\w+)=", planned, re.MULTILINE))
    assert written == {
        "asset_key",
        "check_name",
        "partition",
        "run_id",
        "execution_status",
        "evaluation_event",
        "evaluation_event_timestamp",
        "evaluation_event_storage_id",
    }, f"Dagster's planned check rows now write {sorted(written)}"
    assert "evaluation_event=serialize_value(event)" in planned, (
        "Dagster no longer stores the whole planned event in every partition's row: "
        "store_planned_checks_per_partition may no longer be needed"
    )


def test_a_check_evaluation_is_stored_by_the_method_whose_columns_our_batch_writes() -> None:
    """store_check_evaluations_in_batches writes a batch's check rows as Dagster's
    _update_asset_check_evaluation writes one; if Dagster writes other columns, stores the evaluation
    another way, or starts batching evaluations itself, the batch is wrong or no longer needed."""
    from dagster import DagsterEventType
    from dagster._core.events import BATCH_WRITABLE_EVENTS
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    dispatch = inspect.getsource(SqlEventLogStorage.store_asset_check_event)
    assert "self._update_asset_check_evaluation(event, event_id)" in dispatch
    update = inspect.getsource(SqlEventLogStorage._update_asset_check_evaluation)
    written = set(re.findall(r"^\s+(\w+)=", update, re.MULTILINE))
    assert written == {
        "asset_key",
        "check_name",
        "run_id",
        "partition",
        "execution_status",
        "evaluation_event",
        "evaluation_event_timestamp",
        "evaluation_event_storage_id",
        "materialization_event_storage_id",
    }, f"Dagster's check evaluation now writes {sorted(written)}"
    assert DagsterEventType.ASSET_CHECK_EVALUATION not in BATCH_WRITABLE_EVENTS, (
        "Dagster batches check evaluations itself now: store_check_evaluations_in_batches may go"
    )


def test_the_schema_probes_we_remember_are_dagsters_and_the_schedule_storage_probes_per_tick() -> None:
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
    from dagster._core.storage.runs.sql_run_storage import SqlRunStorage
    from dagster._core.storage.schedules.sql_schedule_storage import SqlScheduleStorage
    from dagster_postgres.event_log import PostgresEventLogStorage

    classes = {"_schedule_storage": SqlScheduleStorage, "_run_storage": SqlRunStorage}
    for part, probes in internals.SCHEMA_PROBES.items():
        cls = classes.get(part, PostgresEventLogStorage)
        for name in probes:
            source = inspect.getsource(getattr(cls, name))
            assert any(probe in source for probe in ("inspect(", "has_table(", "self._has_instigators_table(conn)")), (
                f"{cls.__name__}.{name} no longer probes the schema"
            )
    assert "self.has_instigators_table()" in inspect.getsource(SqlScheduleStorage.create_tick)
    assert callable(SqlEventLogStorage.has_table)


def test_the_cron_arithmetic_is_the_schedulers_and_a_tick_is_stored_at_its_scheduled_time() -> None:
    from datetime import UTC, datetime

    from dagster._core.remote_representation.external import RemoteSchedule
    from dagster._scheduler import scheduler
    from dagster._utils import schedules

    # The catch-up names a cron window by the tick the scheduler evaluates: both walk cron_string_iterator.
    assert "get_latest_completed_cron_tick" in inspect.getsource(internals.latest_cron_tick)
    assert "reverse_cron_string_iterator" in inspect.getsource(schedules.get_latest_completed_cron_tick)
    assert "schedule_execution_time_iterator" in inspect.getsource(RemoteSchedule.execution_time_iterator)
    assert "cron_string_iterator(" in inspect.getsource(schedules.schedule_execution_time_iterator)
    assert "execution_time_iterator(" in inspect.getsource(scheduler.launch_scheduled_runs_for_schedule_iterator)
    at = datetime(2026, 12, 5, 2, 0, tzinfo=UTC)  # 05:00 in Moscow
    assert internals.latest_cron_tick("0 5 * * *", at, "Europe/Moscow") == at
    assert internals.latest_cron_tick("0 * * * *", at.replace(minute=59), "Europe/Moscow") == at
    # schedule_tick_evaluated finds the tick by its timestamp: the scheduler stores the schedule time.
    assert "timestamp=schedule_timestamp," in inspect.getsource(scheduler.launch_scheduled_runs_for_schedule_iterator)


def test_runs_without_loggers_of_their_own_print_through_ours() -> None:
    """Dagster gives a run whose config names no logger its default system loggers: after
    print_run_logs_our_way, that is ours (logs.console_logger_init), not the colored console."""
    from dagster._core.execution import context_creation_job

    internals.print_run_logs_our_way()
    ((definition, config),) = context_creation_job.default_system_loggers(None)
    assert config == {"log_level": "INFO"}
    assert "OPTIMA_LOG_FORMAT" in (definition.description or "")


def test_check_evaluations_are_batched_unless_dagsters_batch_size_turns_batches_off(monkeypatch) -> None:
    from types import SimpleNamespace

    def dagsters_own(event):  # type: ignore[no-untyped-def]
        return None

    for size, batched in (("0", False), ("1", False), ("50", True)):
        monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", size)
        part = SimpleNamespace(store_event=dagsters_own, store_event_batch=dagsters_own)
        internals.store_check_evaluations_in_batches(SimpleNamespace(_event_log_storage=part))
        assert (part.store_event is not dagsters_own) is batched, size


def test_the_storage_a_run_worker_preloads_is_the_one_dagster_yaml_names(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The run worker imports the configured storage before forking (run_launcher.preload): read from
    DAGSTER_HOME's dagster.yaml as Dagster reads it, so a dagster.yaml naming another storage is preloaded too."""
    import importlib
    import shutil

    from optima_pipelines.operations.runtime import project_file

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert internals.configured_storage_module() is None
    shutil.copyfile(project_file("dagster.yaml"), tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    module = internals.configured_storage_module()
    assert module == "optima_pipelines.orchestration.storage"
    assert hasattr(importlib.import_module(module), "OptimaPostgresStorage")
    (tmp_path / "dagster.yaml").write_text("storage:\n  custom:\n    module: some.other_storage\n    class: Other\n")
    assert internals.configured_storage_module() == "some.other_storage"


def test_a_steps_output_is_captured_by_the_compute_log_manager_dagster_yaml_names(tmp_path: Path) -> None:
    """Dagster captures each step's stdout and stderr through the instance's compute log manager, and the
    deployment's dagster.yaml names ours (orchestration/compute_logs.py), which keeps the files where
    Dagster's own manager keeps them for the UI."""
    import shutil

    from dagster._core.execution.plan import execute_plan
    from dagster._core.instance.ref import InstanceRef
    from dagster._serdes import ConfigurableClassData as Data

    from optima_pipelines.operations.runtime import project_file
    from optima_pipelines.orchestration.compute_logs import OptimaComputeLogManager

    assert "compute_log_manager.capture_logs(log_key)" in inspect.getsource(execute_plan), (
        "Dagster no longer captures a step's output through the instance's compute log manager"
    )
    for method in ("get_captured_local_path", "complete_artifact_path", "is_capture_complete"):
        assert callable(getattr(internals.LocalComputeLogManager, method)), method
    shutil.copyfile(project_file("dagster.yaml"), tmp_path / "dagster.yaml")
    data = InstanceRef.from_dir(str(tmp_path)).compute_logs_data
    assert (data.module_name, data.class_name) == (
        "optima_pipelines.orchestration.compute_logs",
        "OptimaComputeLogManager",
    )
    assert isinstance(
        Data(data.module_name, data.class_name, data.config_yaml).rehydrate(OptimaComputeLogManager),
        OptimaComputeLogManager,
    )


def test_daemon_health_is_judged_on_dagsters_heartbeat_interval_with_our_tolerance() -> None:
    """health.check_daemon asks Dagster's controller with a tolerance of its own (the instance's method
    takes none and allows 1,800 s), on the interval at which Dagster's daemons write their heartbeats."""
    from dagster._daemon import controller

    assert controller.DEFAULT_HEARTBEAT_INTERVAL_SECONDS == internals.DAEMON_HEARTBEAT_INTERVAL_SECONDS
    parameters = inspect.signature(controller.get_daemon_statuses).parameters
    assert {"ignore_errors", "heartbeat_interval_seconds", "heartbeat_tolerance_seconds"} <= set(parameters)
    assert "heartbeat_interval_seconds" in inspect.signature(controller.daemon_controller_from_instance).parameters
