"""example-jobs: the template asset runs from its job, on the schedule the cadence registry declares."""

from __future__ import annotations

from dagster import build_schedule_context

from optima_pipelines.definitions import defs
from optima_pipelines.orchestration.cadences import cadence
from optima_pipelines.orchestration.queues import TAG_QUEUE


def test_the_template_job_counts_cabinets_by_status_on_its_schedule(dagster_instance, warehouse_conn):
    warehouse_conn.execute("INSERT INTO cabinets (id, name, status) VALUES ('a', 'A', 'active'), ('b', 'B', 'paused')")
    schedule = defs.get_schedule_def("cabinet_status_summary_schedule")
    entry = cadence(schedule.name)
    assert (schedule.cron_schedule, schedule.execution_timezone, schedule.job_name) == (
        entry.cadence,
        entry.timezone,
        entry.job,
    )
    with build_schedule_context(instance=dagster_instance) as context:
        (run_request,) = schedule.evaluate_tick(context).run_requests or []
    job = defs.get_job_def(schedule.job_name)
    assert job.tags[TAG_QUEUE] == "example-jobs"
    result = job.execute_in_process(instance=dagster_instance, tags=run_request.tags)
    assert result.success
    (mat,) = result.asset_materializations_for_node("cabinet_status_summary")
    assert {k: v.value for k, v in mat.metadata.items()} == {
        "cabinets": 2,
        "active": 1,
        "by_status": {"active": 1, "paused": 1},
    }
