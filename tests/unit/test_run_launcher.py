"""The run launcher dagster.yaml names: OPTIMA_RUN_LAUNCHER chooses it; the warm path's broker and backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance, DefaultRunLauncher

from optima_pipelines.errors import ConfigError
from optima_pipelines.operations.runtime import project_file
from optima_pipelines.orchestration import run_launcher
from optima_pipelines.settings import run_launcher_choice

STORAGE = "postgresql+psycopg2://u:p@db:5432/optima?options=-csearch_path%3Ddagster_prod"


def test_the_choice_defaults_to_dagsters_launcher_and_rejects_typos() -> None:
    assert run_launcher_choice({}) == "celery"
    assert run_launcher_choice({"OPTIMA_RUN_LAUNCHER": "spawn"}) == "spawn"
    assert run_launcher_choice({"OPTIMA_RUN_LAUNCHER": " Celery "}) == "celery"
    with pytest.raises(ConfigError, match="OPTIMA_RUN_LAUNCHER"):
        run_launcher_choice({"OPTIMA_RUN_LAUNCHER": "k8s"})


def test_the_embedded_broker_is_postgresql_itself() -> None:
    broker, backend = run_launcher.broker_and_backend({"OPTIMA_DAGSTER_STORAGE_URL": STORAGE})
    assert broker == f"optima-sqla+{STORAGE}"
    assert backend == f"db+{STORAGE}"


def test_redis_carries_both_the_runs_and_their_states() -> None:
    env = {"OPTIMA_RUN_WORKER_BROKER_URL": "redis://cache:6379/3", "OPTIMA_DAGSTER_STORAGE_URL": STORAGE}
    assert run_launcher.broker_and_backend(env) == ("redis://cache:6379/3", "redis://cache:6379/3")


def test_without_a_broker_or_storage_it_says_what_is_missing() -> None:
    with pytest.raises(ConfigError, match="OPTIMA_RUN_WORKER_BROKER_URL"):
        run_launcher.broker_and_backend({})


def test_the_sqla_transport_polls_quickly_and_is_found_by_its_alias() -> None:
    from kombu.transport import resolve_transport

    run_launcher.make_celery_app({"OPTIMA_DAGSTER_STORAGE_URL": STORAGE})
    transport = resolve_transport(run_launcher.SQLA_TRANSPORT_ALIAS)
    assert transport.polling_interval == 0.1
    assert transport.__mro__[1].__module__ == "kombu.transport.sqlalchemy"


def test_the_app_routes_our_task_to_the_run_queue() -> None:
    app = run_launcher.make_celery_app({"OPTIMA_DAGSTER_STORAGE_URL": STORAGE})
    assert app.conf.task_routes[run_launcher.TASK_EXECUTE_RUN]["queue"] == run_launcher.RUN_QUEUE
    assert [q.name for q in app.conf.task_queues] == [run_launcher.RUN_QUEUE]
    assert app.conf.worker_prefetch_multiplier == 1


@pytest.mark.parametrize(("choice", "inner"), [("spawn", DefaultRunLauncher), ("celery", run_launcher.WarmRunLauncher)])
def test_dagster_yaml_loads_the_launcher_the_environment_chooses(tmp_path: Path, monkeypatch, choice, inner) -> None:  # type: ignore[no-untyped-def]
    shutil.copyfile(project_file("dagster.yaml"), tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", STORAGE)
    monkeypatch.setenv("OPTIMA_RUN_LAUNCHER", choice)
    from dagster._core.instance.config import dagster_instance_config  # the config only: no database

    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_launcher"]["class"] == "OptimaRunLauncher"
    launcher = run_launcher.OptimaRunLauncher.from_config_value(None, {})  # type: ignore[arg-type]
    assert isinstance(launcher.inner, inner)
    assert launcher.supports_check_run_worker_health is (choice == "celery")


def test_the_warm_run_workers_run_when_nothing_is_set(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("OPTIMA_RUN_LAUNCHER", raising=False)
    monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", STORAGE)
    with DagsterInstance.ephemeral() as instance:
        launcher = run_launcher.OptimaRunLauncher()
        launcher.register_instance(instance)
        assert isinstance(launcher.inner, run_launcher.WarmRunLauncher)
        assert launcher.supports_resume_run is False


def test_the_nightly_prune_deletes_only_old_delivered_messages_and_old_task_states(database_url: str) -> None:  # type: ignore[no-untyped-def]
    import secrets
    from datetime import UTC, datetime, timedelta

    from optima_pipelines.db.connection import connect
    from optima_pipelines.db.migrate import ensure_schemas
    from optima_pipelines.db.urls import dagster_storage_url
    from tests.conftest import drop_schemas

    schema = f"dagster_broker{secrets.token_hex(3)}"
    ensure_schemas(database_url, schema)
    env = {"OPTIMA_RUN_LAUNCHER": "celery", "OPTIMA_DAGSTER_STORAGE_URL": dagster_storage_url(database_url, schema)}
    try:
        run_launcher.prepare_broker(env)
        run_launcher.prepare_broker(env)  # idempotent
        old_local, old_utc = (
            datetime.now() - timedelta(days=9),
            datetime.now(UTC).replace(tzinfo=None) - timedelta(days=9),
        )
        with connect(database_url, schema, autocommit=True) as conn:
            (queue_id,) = conn.execute("SELECT id FROM kombu_queue").fetchone()
            for visible, at in ((False, old_local), (True, old_local), (False, datetime.now())):
                conn.execute(
                    "INSERT INTO kombu_message (id, visible, timestamp, payload, version, queue_id) "
                    "VALUES (nextval('message_id_sequence'), %s, %s, 'p', 1, %s)",
                    (visible, at, queue_id),
                )
            for task_id, done in (("old", old_utc), ("new", datetime.now(UTC).replace(tzinfo=None))):
                conn.execute(
                    "INSERT INTO celery_taskmeta (id, task_id, status, date_done) "
                    "VALUES (nextval('task_id_sequence'), %s, 'SUCCESS', %s)",
                    (task_id, done),
                )
        assert run_launcher.prune_broker(timedelta(days=7), env) == 2
        with connect(database_url, schema, autocommit=True) as conn:
            left = conn.execute("SELECT visible FROM kombu_message ORDER BY id").fetchall()
            tasks = conn.execute("SELECT task_id FROM celery_taskmeta").fetchall()
        assert left == [(True,), (False,)]  # the pending one and the recent one
        assert tasks == [("new",)]
        assert run_launcher.prune_broker(timedelta(days=7), {**env, "OPTIMA_RUN_LAUNCHER": "spawn"}) == 0
    finally:
        drop_schemas(database_url, schema)
