"""Queue hygiene: scheduled runs never wait longer than their cadence window.

The original let a scheduled job wait at most one cadence window (ads 5 min, the increment its
interval, the nightly backfill 3 h, finance 6 h) behind a busy cabinet, then end it as
`skipped: account-busy`. Here a sensor cancels such queued runs and marks them with the tag
``optima/skipped=account-busy`` and an event that says why; the next tick of the cadence brings
fresh work anyway.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from optima_pipelines.orchestration.cadences import cadences, sensor_status
from optima_pipelines.orchestration.dagster_internals import GRPC_INFO_TAG
from optima_pipelines.orchestration.queues import SKIPPED_ACCOUNT_BUSY as ACCOUNT_BUSY
from optima_pipelines.orchestration.queues import TAG_SKIPPED, TAG_TRIGGER


@dataclass(frozen=True)
class QueuedRun:
    run_id: str
    job_name: str
    queued_seconds: float


def windows_by_job() -> dict[str, int]:
    """The cadence window of each scheduled job: a sweep's, and its single-cabinet job's (a
    scheduled run of one cabinet, a resume say, waits no longer than the sweep would)."""
    windows = {c.job: c.window_seconds for c in cadences() if c.job and c.window_seconds}
    return windows | {job.removesuffix("_sweep"): w for job, w in windows.items() if job.endswith("_sweep")}


def overdue(runs: list[QueuedRun], windows: dict[str, int]) -> list[tuple[QueuedRun, int]]:
    """Scheduled runs queued longer than their job's cadence window (pure: unit-tested)."""
    return [(r, windows[r.job_name]) for r in runs if r.job_name in windows and r.queued_seconds > windows[r.job_name]]


@sensor(
    name="account_busy_sensor",
    minimum_interval_seconds=30,
    default_status=sensor_status("account_busy_sensor"),
    description="Cancels scheduled runs still queued after their cadence window and marks them "
    "`optima/skipped=account-busy` (the original's skipped: account-busy).",
)
def account_busy_sensor(context: SensorEvaluationContext):
    instance = context.instance
    now = time.time()
    records = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.QUEUED], tags={TAG_TRIGGER: "schedule"}), limit=1000
    )
    queued = [
        QueuedRun(r.dagster_run.run_id, r.dagster_run.job_name, now - r.create_timestamp.timestamp()) for r in records
    ]
    late = overdue(queued, windows_by_job())
    for run, window in late:
        dagster_run = instance.get_run_by_id(run.run_id)
        if dagster_run is None or dagster_run.status != DagsterRunStatus.QUEUED:
            continue
        reason = (
            f"skipped: {ACCOUNT_BUSY}: queued {run.queued_seconds / 60:.1f} min, longer than the "
            f"{window / 60:.0f}-min cadence window of {run.job_name}; the next tick brings fresh work"
        )
        instance.add_run_tags(run.run_id, {TAG_SKIPPED: ACCOUNT_BUSY})
        instance.report_engine_event(reason, dagster_run)
        instance.run_coordinator.cancel_run(run.run_id)
        context.log.info(f"{run.run_id}: {reason}")
    return SkipReason(f"{len(queued)} scheduled runs queued, {len(late)} skipped as {ACCOUNT_BUSY}")


# -- Runs whose worker died ------------------------------------------------------------------------

#: Runs launched by the DefaultRunLauncher carry where their code server listens; only runs whose
#: worker lives on this machine can be checked by pid (Kubernetes' launcher checks its own pods).
LOCAL_HOSTS = {None, "", "localhost", "127.0.0.1", "::1"}


def worker_alive(pids_and_times: Iterable[tuple[int, float]]) -> bool:
    """Whether any process that ran part of a run still exists (a pid reused by a newer process
    does not count: it must have been started before it logged the run's event)."""
    for pid, logged_at in pids_and_times:
        try:
            process = psutil.Process(pid)
            # A killed worker its parent has not reaped yet lingers as a zombie: it is dead.
            if process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= logged_at + 1:
                return True
        except psutil.Error:
            continue
    return False


def _run_pids(instance: DagsterInstance, run_id: str) -> list[tuple[int, float]]:
    entries = []
    for event_type in (DagsterEventType.RUN_START, DagsterEventType.STEP_START):
        for entry in instance.all_logs(run_id, of_type=event_type):
            pid = entry.dagster_event.pid if entry.dagster_event else None
            if pid:
                entries.append((pid, entry.timestamp))
    return entries


def _launched_here(tags: dict[str, str]) -> bool:
    import json

    info = tags.get(GRPC_INFO_TAG)
    if info is None:
        return False
    try:
        return json.loads(info).get("host") in LOCAL_HOSTS
    except ValueError:
        return False


@sensor(
    name="dead_run_sensor",
    minimum_interval_seconds=15,
    default_status=sensor_status("dead_run_sensor"),
    description="Marks a STARTED run failed when every process that ran it is gone (SIGKILL, OOM), so "
    "its cabinet is released within seconds instead of never (the DefaultRunLauncher has no worker health check).",
)
def dead_run_sensor(context: SensorEvaluationContext):
    instance = context.instance
    started = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]), limit=500)
    dead = 0
    for run in started:
        if not _launched_here(dict(run.tags)):
            continue
        pids = _run_pids(instance, run.run_id)
        if not pids or worker_alive(pids):
            continue
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status != DagsterRunStatus.STARTED:
            continue
        reason = f"the run's worker process is gone (pids {sorted({p for p, _ in pids})}): it was killed or crashed"
        instance.report_run_failed(current, reason)
        context.log.info(f"{run.run_id}: {reason}")
        dead += 1
    return SkipReason(f"{len(started)} started runs, {dead} with a dead worker marked failed")
