"""OPTIMA_ENV (the original's QUEUE_PREFIX): two environments on one server never see each other."""

import secrets
import shutil

import pytest
from dagster import DagsterInstance, materialize

from optima_pipelines.db.urls import dagster_storage_url
from optima_pipelines.operations.runtime import project_file
from tests.cli_runner import invoke_cli
from tests.conftest import drop_schemas


@pytest.fixture
def two_envs(database_url, secret_key, tmp_path):
    names = [f"iso{secrets.token_hex(3)}a", f"iso{secrets.token_hex(3)}b"]
    yield names
    drop_schemas(database_url, *(f"{kind}_{env}" for env in names for kind in ("optima", "dagster")))


def test_environments_on_one_server_stay_apart(two_envs, database_url, secret_key, tmp_path, monkeypatch):
    stage, prod = two_envs
    base = {"OPTIMA_DATABASE_URL": database_url, "OPTIMA_SECRET_KEY": secret_key, "OPTIMA_STATE_DIR": str(tmp_path)}
    assert invoke_cli("cabinets", "add", "only-in-stage", env={**base, "OPTIMA_ENV": stage}).returncode == 0
    assert invoke_cli("cabinets", "add", "only-in-prod", env={**base, "OPTIMA_ENV": prod}).returncode == 0
    stage_list = invoke_cli("cabinets", "list", env={**base, "OPTIMA_ENV": stage}).stdout
    prod_list = invoke_cli("cabinets", "list", env={**base, "OPTIMA_ENV": prod}).stdout
    assert "only-in-stage" in stage_list and "only-in-prod" not in stage_list
    assert "only-in-prod" in prod_list and "only-in-stage" not in prod_list

    # Runs: a run materialized in stage's Dagster storage is not in prod's.
    from optima_pipelines.assets.example import cabinet_status_summary
    from optima_pipelines.definitions import RESOURCES

    run_ids = {}
    for env in (stage, prod):
        home = tmp_path / f"home_{env}"
        home.mkdir()
        shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        monkeypatch.setenv("OPTIMA_ENV", env)
        monkeypatch.setenv("OPTIMA_DATABASE_URL", database_url)
        monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", dagster_storage_url(database_url, f"dagster_{env}"))
        with DagsterInstance.get() as instance:
            result = materialize([cabinet_status_summary], resources=RESOURCES, instance=instance)
            assert result.success
            run_ids[env] = result.run_id
            # Each environment's asset saw only its own single cabinet.
            mat = result.asset_materializations_for_node("cabinet_status_summary")[0]
            assert mat.metadata["cabinets"].value == 1
            assert [r.run_id for r in instance.get_runs()] == [result.run_id]
    assert run_ids[stage] != run_ids[prod]
