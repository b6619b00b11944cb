"""Dagster's storage (dagster.yaml: orchestration/storage.py): a process's statements share a few
pooled PostgreSQL sessions instead of opening one each, whichever DagsterInstance they come from."""

from __future__ import annotations

import os

import sqlalchemy as sa
from dagster import DagsterInstance, DagsterRun

from optima_pipelines.orchestration.storage import OptimaPostgresStorage, shared_engine


def test_statements_of_a_process_reuse_its_sessions_whichever_instance_sends_them(dagster_instance):
    assert dagster_instance.get_ref().storage_data.class_name == OptimaPostgresStorage.__name__
    engine = shared_engine(os.environ["OPTIMA_DAGSTER_STORAGE_URL"])
    opened: list[object] = []
    used: list[object] = []

    def count(dbapi_connection: object, record: object) -> None:
        opened.append(dbapi_connection)

    def use(dbapi_connection: object, record: object, proxy: object) -> None:
        used.append(dbapi_connection)

    sa.event.listen(engine, "connect", count)
    sa.event.listen(engine, "checkout", use)
    try:
        dagster_instance.get_runs(limit=1)  # the pool's session, if it had none yet
        before = len(opened)
        for n in range(20):
            dagster_instance.add_run(DagsterRun(job_name="probe", run_id=f"00000000-0000-0000-0000-{n:012d}"))
            dagster_instance.get_runs(limit=5)
        # A second instance of the same process (a sensor tick's, in the code server) uses them too.
        with DagsterInstance.get() as other:
            for _ in range(20):
                assert len(other.get_runs(limit=50)) == 20
        assert len(used) >= 61, "the statements did not go through the process's pooled engine"
        assert len(opened) == before, f"{len(opened) - before} sessions opened for 61 statements in turn"
    finally:
        sa.event.remove(engine, "connect", count)
        sa.event.remove(engine, "checkout", use)
