"""The code location loads, and runs execute against PostgreSQL storage."""

import os
import subprocess
import sys

from dagster import DagsterRunStatus, RunsFilter, materialize

from optima_pipelines.operations.runtime import PACKAGE_DIR, project_file


def test_definitions_load_with_expected_contents():
    from optima_pipelines.definitions import defs

    repo = defs.get_repository_def()
    asset_keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert "cabinet_status_summary" in asset_keys
    assert "cabinet_partitions_sensor" in {s.name for s in repo.sensor_defs}


def test_dagster_definitions_validate_passes(optima_env):
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(project_file("workspace.yaml"))],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_packaged_deploy_files_are_the_top_level_ones():
    top = PACKAGE_DIR.parent
    for name in ("dagster.yaml", "workspace.yaml"):
        assert project_file(name).read_text() == (top / name).read_text()


def test_run_executes_against_postgres_storage(dagster_instance, warehouse_conn, settings):
    from optima_pipelines.assets.example import cabinet_status_summary
    from optima_pipelines.definitions import RESOURCES

    warehouse_conn.execute("INSERT INTO cabinets (id, name) VALUES ('a', 'A'), ('b', 'B')")
    result = materialize([cabinet_status_summary], resources=RESOURCES, instance=dagster_instance)
    assert result.success
    # The run and its materialization are in PostgreSQL, in this environment's dagster schema.
    storage = type(dagster_instance.run_storage).__name__
    assert storage == "PostgresRunStorage"
    with __import__("psycopg").connect(os.environ["OPTIMA_DATABASE_URL"]) as conn:
        n = conn.execute(
            f"SELECT count(*) FROM dagster_{settings.env}.runs WHERE run_id = %s", (result.run_id,)
        ).fetchone()[0]
    assert n == 1
    runs = dagster_instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.SUCCESS]))
    assert [r.run_id for r in runs] == [result.run_id]
    mat = result.asset_materializations_for_node("cabinet_status_summary")[0]
    assert mat.metadata["cabinets"].value == 2
