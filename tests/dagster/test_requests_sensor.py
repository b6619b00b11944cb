"""The requests sensor keeps a request in step with its run, across Dagster's run retries."""

from __future__ import annotations

import re
import time
import uuid

from dagster import DagsterEvent, DagsterEventType, DagsterRun, DagsterRunStatus, EventLogEntry

from optima_pipelines.orchestration.queues import TAG_NOT_EXECUTED, TAG_REQUEST_ID
from optima_pipelines.sensors.requests import reconcile
from optima_pipelines.warehouse import requests as outbox

WILL_RETRY = "dagster/will_retry"


def add_run(instance, request_id: int, **tags: str) -> DagsterRun:  # type: ignore[no-untyped-def]
    run = DagsterRun(
        job_name="digitization_import",
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.STARTED,
        tags={TAG_REQUEST_ID: str(request_id), **tags},
    )
    return instance.add_run(run)


def status(conn, instance, request_id: int) -> tuple[str, str | None]:  # type: ignore[no-untyped-def]
    reconcile(instance, conn, outbox.get_request(conn, request_id))
    request = outbox.get_request(conn, request_id)
    return request.status, request.run_id


def test_a_request_whose_run_died_waits_for_the_retry_and_ends_with_it(warehouse_conn, dagster_instance):
    request_id = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    died = add_run(dagster_instance, request_id)
    assert status(warehouse_conn, dagster_instance, request_id) == ("running", died.run_id)

    # Its worker died (the deployment stopped under it): the run fails and Dagster will re-queue it.
    dagster_instance.report_run_failed(died, "the run's worker process is gone")
    assert dagster_instance.get_run_by_id(died.run_id).tags.get(WILL_RETRY) == "true"
    assert status(warehouse_conn, dagster_instance, request_id) == ("running", died.run_id)

    retry = add_run(dagster_instance, request_id, **{"dagster/parent_run_id": died.run_id})
    assert status(warehouse_conn, dagster_instance, request_id) == ("running", retry.run_id)
    dagster_instance.report_run_failed(retry, "WB said 401: the token is invalid")
    dagster_instance.add_run_tags(retry.run_id, {WILL_RETRY: "false"})  # its one retry is spent
    request_status, run_id = status(warehouse_conn, dagster_instance, request_id)
    assert (request_status, run_id) == ("failed", retry.run_id)
    assert "the token is invalid" in outbox.get_request(warehouse_conn, request_id).error


def test_a_retry_a_run_worker_did_not_execute_leaves_the_request_to_the_run_that_executed(
    warehouse_conn, dagster_instance
):
    """Run monitoring failed a run whose execution lived on (issue 37); its retry was not executed by the
    run workers (canceled, tagged with the run that executes): the request follows the first run."""
    request_id = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    first = add_run(dagster_instance, request_id)
    retry = add_run(dagster_instance, request_id, **{"dagster/parent_run_id": first.run_id})
    dagster_instance.add_run_tags(retry.run_id, {TAG_NOT_EXECUTED: first.run_id})
    dagster_instance.report_run_canceled(retry, "Not executed: the run it retries still executes")
    assert status(warehouse_conn, dagster_instance, request_id) == ("running", first.run_id)
    dagster_instance.handle_new_event(
        EventLogEntry(
            error_info=None,
            level="INFO",
            user_message="",
            run_id=first.run_id,
            timestamp=time.time(),
            dagster_event=DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name=first.job_name),
        )
    )
    assert status(warehouse_conn, dagster_instance, request_id) == ("succeeded", first.run_id)


def test_a_request_whose_run_failed_for_good_fails_at_once(warehouse_conn, dagster_instance):
    request_id = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    run = add_run(dagster_instance, request_id)
    dagster_instance.report_run_failed(run, "the payload names no cabinet")
    dagster_instance.add_run_tags(run.run_id, {WILL_RETRY: "false"})
    assert status(warehouse_conn, dagster_instance, request_id) == ("failed", run.run_id)
    assert "names no cabinet" in outbox.get_request(warehouse_conn, request_id).error


def test_a_tick_reads_the_payload_of_pending_requests_only(warehouse_conn, dagster_instance):
    """A running bulk price upload (25,000 items, about 1 MB) is not read again on every tick."""
    items = [{"nmID": i, "price": 1000} for i in range(25_000)]
    running = outbox.create_request(warehouse_conn, "pricing-bulk", "c1", {"items": items})
    outbox.mark_running(warehouse_conn, running, str(uuid.uuid4()))
    pending = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    opened = {r.id: r for r in outbox.open_requests(warehouse_conn, ["pricing-bulk", "import-user-feeds"])}
    assert (opened[running].status, opened[running].payload) == ("running", None)
    assert (opened[pending].status, opened[pending].payload) == ("pending", {"dateFrom": "2026-11-01"})
    assert len(outbox.get_request(warehouse_conn, running).payload["items"]) == 25_000  # still stored whole


def test_unknown_kinds_and_requests_pending_too_long_fail_at_the_next_tick_naming_why(warehouse_conn, dagster_instance):
    from optima_pipelines.sensors.requests import requests_sensor
    from tests.engines import evaluate

    unknown = outbox.create_request(warehouse_conn, "import-user-reports", "c1", {})
    huge = outbox.create_request(warehouse_conn, "k" * 100_000, "c1", {})  # a careless backend's kind
    stale = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    warehouse_conn.execute("UPDATE requests SET created_at = now() - interval '7 hours' WHERE id = %s", (stale,))
    evaluate(requests_sensor, dagster_instance)

    failed = outbox.get_request(warehouse_conn, unknown)
    assert failed.status == "failed"
    assert failed.error.startswith("unknown request kind 'import-user-reports': expected one of ")
    assert "import-user-report," in failed.error and "pricing-bulk" in failed.error
    long_kind = outbox.get_request(warehouse_conn, huge)
    assert long_kind.status == "failed" and long_kind.error.startswith("unknown request kind 'kkkk")
    assert len(long_kind.error) < 500  # the kind is cut in the reason, not copied whole
    old = outbox.get_request(warehouse_conn, stale)
    assert old.status == "failed" and old.error.startswith("not started within 6 h of its creation")
    assert outbox.live_user_import_cabinets(warehouse_conn) == set()


def test_only_live_user_imports_of_the_known_kinds_hold_a_cabinet(warehouse_conn):
    for kind, cabinet in [("import-user-reports", "c1"), ("import-user-anything", "c2"), ("pricing-bulk", "c3")]:
        outbox.create_request(warehouse_conn, kind, cabinet, {})
    old = outbox.create_request(warehouse_conn, "import-user-report", "c4", {"path": "/x.xlsx"})
    outbox.mark_running(warehouse_conn, old, str(uuid.uuid4()))
    warehouse_conn.execute("UPDATE requests SET created_at = now() - interval '7 hours' WHERE id = %s", (old,))
    assert outbox.live_user_import_cabinets(warehouse_conn) == set()
    outbox.create_request(warehouse_conn, "import-user-feeds", "c5", {"dateFrom": "2026-11-01"})
    outbox.create_request(warehouse_conn, "import-user-report", "c6", {"path": "/x.xlsx"})
    assert outbox.live_user_import_cabinets(warehouse_conn) == {"c5", "c6"}


def test_a_request_marked_running_without_a_run_fails_within_a_minute(warehouse_conn, dagster_instance):
    """A backend that set status 'running' itself (or a run id that was never a run, or a run deleted):
    no run will ever finish it, and while it is open its cabinet's scheduled syncs skip the cabinet.
    A minute after it last changed it fails with that reason (issue 37), not 6 h later."""
    fresh = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    old = outbox.create_request(warehouse_conn, "import-user-feeds", "c1", {"dateFrom": "2026-11-01"})
    for request_id in (fresh, old):
        outbox.mark_running(warehouse_conn, request_id, "not-a-run")
    warehouse_conn.execute("UPDATE requests SET updated_at = now() - interval '61 seconds' WHERE id = %s", (old,))
    assert outbox.live_user_import_cabinets(warehouse_conn) == {"c1"}
    assert status(warehouse_conn, dagster_instance, fresh) == ("running", "not-a-run")
    assert status(warehouse_conn, dagster_instance, old) == ("failed", "not-a-run")
    error = outbox.get_request(warehouse_conn, old).error
    assert re.match(r"running with no run of it for 6\d s \(run not-a-run\)", error), error
