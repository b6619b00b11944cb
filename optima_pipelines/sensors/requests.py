"""The requests sensor: launches one run per pending request and keeps the request row in step with it.

Request kinds are served by handlers (`RequestHandler`) that each domain declares next to its
sensors; `HANDLERS` below lists them all, and no other kind exists: a request of another kind, or
one pending past `requests.STALE_AFTER`, ends failed with the reason. A handler validates the
request and returns the run config; an invalid request ends as failed with the handler's reason and
launches nothing.

Exactly once: the run key is ``request-<id>``, and Dagster never launches a sensor run key twice,
even across daemon restarts (DESIGN.md §4.9). The run id, status and error text are copied from the
run onto the request on the following ticks (and by the run itself when it succeeds). A run whose
worker died (the deployment stopped under it) is re-queued by Dagster's run retries: the request
waits for that retry instead of failing with the dead run.
"""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    RunRecord,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
)

from optima_pipelines.errors import OptimaError
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor
from optima_pipelines.orchestration.dagster_internals import WILL_RETRY_TAG, SerializableErrorInfo
from optima_pipelines.orchestration.queues import (
    PRIORITY_USER,
    TAG_NOT_EXECUTED,
    TAG_REQUEST_ID,
    TAG_TRIGGER,
    queue_tags,
)
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.handlers import RequestHandler
from optima_pipelines.warehouse import requests as outbox


def _handlers() -> dict[str, RequestHandler]:
    from optima_pipelines.sensors import autobidder, autoreply, catalog, digitization, finance, pricing_bulk

    return {
        h.kind: h
        for h in [
            *digitization.REQUEST_HANDLERS,
            *finance.REQUEST_HANDLERS,
            *autobidder.REQUEST_HANDLERS,
            *catalog.REQUEST_HANDLERS,
            *pricing_bulk.REQUEST_HANDLERS,
            *autoreply.REQUEST_HANDLERS,
        ]
    }


HANDLERS = _handlers()


def error_reason(error: SerializableErrorInfo) -> str:
    """What a person should read of a step's error: its innermost cause (the real one behind
    "Exceeded max_retries of 4"), with the class name but no module path, and a Failure's bare
    description (no ``dagster._core.definitions.events.Failure:`` in front)."""
    while error.cause is not None:
        error = error.cause
    message = error.message.strip()
    head, sep, rest = message.partition(": ")
    if sep and head.rsplit(".", 1)[-1] == error.cls_name:
        return rest.strip() if error.cls_name == "Failure" else f"{error.cls_name}: {rest.strip()}"
    return message


def run_failure_reason(instance: DagsterInstance, run_id: str) -> str:
    """The error text of a failed run: its step failure if any, else the run failure message."""
    for event_type in (DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE):
        logs = instance.all_logs(run_id, of_type=event_type)
        for entry in reversed(logs):
            event = entry.dagster_event
            data = getattr(event, "event_specific_data", None) if event else None
            user_failure = getattr(data, "user_failure_data", None)
            if user_failure is not None and user_failure.description:
                return user_failure.description.strip()
            error = getattr(data, "error", None)
            if error is not None and getattr(error, "message", None):
                return error_reason(error)
            if event is not None and event.message:
                return event.message.strip()
    return "the run failed"


#: How long a request may stay running with no run of it before it is failed (the sensor marks a request
#: running only once its run exists, and a run marks its own request: a run that is no run is a mistake).
RUNNING_WITHOUT_RUN = timedelta(seconds=60)

#: How long a failed run may go without Dagster's verdict on retrying it before the failure is final
#: (the daemon writes the verdict right after the failure event; a missing one means it never will).
RETRY_VERDICT_WAIT_S = 120


def retry_pending(instance: DagsterInstance, record: RunRecord) -> bool:
    """True while a failed run is to be re-queued by Dagster's run retries (a worker that died, a
    deployment stopped under it): its retry, which carries the same tags, then serves the request."""
    run = record.dagster_run
    if run.status != DagsterRunStatus.FAILURE or not instance.run_retries_enabled:
        return False
    verdict = run.tags.get(WILL_RETRY_TAG)
    if verdict is None:
        ended = record.end_time or record.update_timestamp.timestamp()
        return time.time() - ended < RETRY_VERDICT_WAIT_S
    return verdict == "true"


def reconcile(instance: DagsterInstance, conn: psycopg.Connection, request: outbox.Request) -> str | None:
    """Copy the state of the request's run (the latest, a retry if there is one) onto it; returns the
    new status if it changed."""
    records = [
        r
        for r in instance.get_run_records(RunsFilter(tags={TAG_REQUEST_ID: str(request.id)}), limit=3)
        # A retry a run worker did not execute (its first run still executed): the first run serves it.
        if TAG_NOT_EXECUTED not in r.dagster_run.tags
    ][:1]
    if not records and request.run_id:  # a run launched by hand with the request in its config
        records = list(instance.get_run_records(RunsFilter(run_ids=[request.run_id]), limit=1))
    if not records:
        idle = outbox.running_for(conn, request.id) if request.status == "running" else None
        if idle is not None and idle > RUNNING_WITHOUT_RUN:
            # Marked running with a run id that is no run (deleted, or set by hand): nothing will end
            # it, and while it is open its cabinet's scheduled syncs skip the cabinet.
            outbox.mark_failed(
                conn,
                request.id,
                f"running with no run of it for {idle.total_seconds():.0f} s (run {request.run_id or 'none'}); "
                "create it again",
            )
            return "failed"
        return None
    run = records[0].dagster_run
    if retry_pending(instance, records[0]):
        return None
    if run.status == DagsterRunStatus.SUCCESS:
        outbox.mark_succeeded(conn, request.id, run.run_id, request.result or {})
        return "succeeded"
    if run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
        reason = (
            "the run was canceled"
            if run.status == DagsterRunStatus.CANCELED
            else run_failure_reason(instance, run.run_id)
        )
        outbox.mark_failed(conn, request.id, reason, run.run_id)
        return "failed"
    if request.status == "pending" or request.run_id != run.run_id:
        outbox.mark_running(conn, request.id, run.run_id)
        return "running"
    return None


def plan_requests(
    conn: psycopg.Connection, instance: DagsterInstance, handlers: dict[str, RequestHandler]
) -> tuple[list[RunRequest], list[str]]:
    """Run requests for pending requests, and the state changes of open ones (for the tick's log)."""
    run_requests: list[RunRequest] = []
    changes = [f"request {rid}: failed ({reason})" for rid, reason in outbox.fail_unservable(conn, list(handlers))]
    conn.commit()
    for request in outbox.open_requests(conn, list(handlers)):
        new_status = reconcile(instance, conn, request)
        if new_status is not None:
            changes.append(f"request {request.id}: {new_status}")
            conn.commit()
            continue
        if request.status != "pending":
            continue
        handler = handlers[request.kind]
        try:
            run_config = handler.run_config(conn, request)
        except OptimaError as exc:
            outbox.mark_failed(conn, request.id, str(exc))
            conn.commit()
            changes.append(f"request {request.id}: failed ({exc})")
            continue
        run_requests.append(
            RunRequest(
                run_key=f"request-{request.id}",
                job_name=handler.job.name,
                run_config=run_config,
                tags={
                    **queue_tags(handler.queue, cabinet_id=request.cabinet_id, priority=PRIORITY_USER),
                    TAG_REQUEST_ID: str(request.id),
                    TAG_TRIGGER: "user",
                },
            )
        )
    return run_requests, changes


_CADENCE = cadence("requests_sensor")


@cadence_sensor(
    _CADENCE,
    default_interval_seconds=10,
    jobs=[h.job for h in HANDLERS.values()],
    description="Launches one run per pending request (user imports, on-demand syncs) at user priority, "
    "and copies each run's id, status and error onto its request row.",
)
def requests_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        with warehouse.connect() as conn:
            run_requests, changes = plan_requests(conn, context.instance, HANDLERS)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the requests table: {exc.__class__.__name__}: {exc}")
    for change in changes:
        context.log.info(change)
    if not run_requests:
        return SkipReason(f"no new requests ({len(changes)} updated)")
    return SensorResult(run_requests=run_requests)
