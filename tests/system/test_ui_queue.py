"""Foundation, end to end: the UI serves the code location and a run launched through its queue succeeds."""

import pytest

pytestmark = pytest.mark.system

LAUNCH = """
mutation($selector: JobOrPipelineSelector!) {
  launchRun(executionParams: { selector: $selector }) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
  }
}
"""


def test_ui_lists_the_location_and_a_queued_run_succeeds_on_postgres(spawn_stack):  # type: ignore[no-untyped-def]
    stack, dep = spawn_stack, spawn_stack.dev
    stack.add_cabinet_row("ui-1", "UI cabinet", None)
    # no sensor runs: the run goes through the queue alone
    repos = dep.graphql("{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }")
    assert {"name": "__repository__", "location": {"name": "optima_pipelines"}} in repos["repositoriesOrError"]["nodes"]

    selector = {
        "repositoryLocationName": "optima_pipelines",
        "repositoryName": "__repository__",
        "jobName": "__ASSET_JOB",
        "assetSelection": [{"path": ["cabinet_status_summary"]}],
    }
    launched = dep.graphql(LAUNCH, {"selector": selector})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    assert launched["run"]["status"] == "QUEUED"  # it went through the queue, not straight to a worker
    run_id = launched["run"]["runId"]
    assert dep.wait_for_run(run_id) == "SUCCESS"

    # The run is recorded in this environment's Dagster schema in PostgreSQL.
    with stack.warehouse() as conn:
        row = conn.execute(f"SELECT status FROM dagster_{stack.env}.runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row == ("SUCCESS",)
