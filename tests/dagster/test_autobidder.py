"""`autobidder-sync` requests in process: pending → run at user priority in its own queue → succeeded, with WB's data."""

from __future__ import annotations

from datetime import timedelta

import pytest

from optima_pipelines.definitions import defs
from optima_pipelines.sync import ads
from optima_pipelines.warehouse import requests as outbox
from tests.dagster.test_ads import campaigns_in_warehouse, campaigns_of_truth, stats_in_warehouse, stats_of_truth
from tests.wb_syncs import evaluate_requests_sensor, materializations, served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=20, orders_per_day=60, history_days=30, campaigns=6))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def test_a_request_runs_at_user_priority_and_ends_succeeded_with_the_run_id(wb, warehouse_conn, dagster_instance):
    request_id = outbox.create_request(warehouse_conn, "autobidder-sync", "c1", {})
    (run_request,) = evaluate_requests_sensor(dagster_instance).run_requests
    assert run_request.job_name == "autobidder_sync"
    assert run_request.run_key == f"request-{request_id}"
    tags = run_request.tags
    # The user lane: it waits for its cabinet, never for the sync queues' scheduled sweeps.
    assert (tags["optima/queue"], tags["optima/lane"], tags["optima/cabinet"]) == ("autobidder-sync", "user", "c1")
    assert "optima/queue-class" not in tags
    assert int(tags["dagster/priority"]) > 0

    run = defs.get_job_def("autobidder_sync").execute_in_process(
        run_config=run_request.run_config, instance=dagster_instance, tags=tags
    )
    assert run.success
    request = outbox.get_request(warehouse_conn, request_id)
    assert (request.status, request.run_id) == ("succeeded", run.run_id)  # set by the run itself
    assert request.result["ad_campaign_stats"]["rows_inserted"] > 0

    begin, end = ads.ads_window()
    days = [begin + timedelta(days=n) for n in range((end - begin).days + 1)]
    assert campaigns_in_warehouse(warehouse_conn, "c1") == campaigns_of_truth(wb, "c1")
    assert stats_in_warehouse(warehouse_conn, "c1") == stats_of_truth(wb, "c1", days)
    metas = materializations(dagster_instance, "ad_campaign_stats").values()
    assert metas and all(m["trigger"] == "manual" and m["request_id"] == request_id for m in metas)

    # The next tick launches nothing new for it, and leaves it succeeded.
    assert not getattr(evaluate_requests_sensor(dagster_instance), "run_requests", None)
    assert outbox.get_request(warehouse_conn, request_id).status == "succeeded"


def test_a_request_for_an_unknown_cabinet_fails_without_a_run(wb, warehouse_conn, dagster_instance):
    request_id = outbox.create_request(warehouse_conn, "autobidder-sync", "ghost", {})
    assert not getattr(evaluate_requests_sensor(dagster_instance), "run_requests", None)
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "failed" and "cabinet 'ghost' does not exist" in request.error
