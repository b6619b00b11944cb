"""repricer-schedule: every (cabinet, rule interval) every N hours, kept in step with ``repricer_rules``.

Dagster schedules are fixed when the code loads; the original registered one repeatable job per
(cabinet, interval) from the rules table at start. Here one sensor reads the rules table every
minute (one cheap query) and, when groups enter a new slot of their interval, launches one sweep
over all of them (jobs/repricer.py ``repricer_sweep``): a new interval runs at once, a removed one
stops, with no reload. The cursor (group → its last slot launched) and run keys made of the slots
make each slot run once, across daemon restarts.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import psycopg
from dagster import (
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
)

from optima_pipelines.engines import repricer
from optima_pipelines.errors import OptimaError
from optima_pipelines.jobs.repricer import SWEEP, repricer_job, repricer_sweep_job, slot_item
from optima_pipelines.orchestration.cadences import cadence, cadence_sensor
from optima_pipelines.orchestration.fanout import busy_cabinets
from optima_pipelines.orchestration.queues import sweep_tags
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.wb_sync import swept_cabinets
from optima_pipelines.settings import load_settings

_CADENCE = cadence("repricer_sensor")


def sweep_requests(due: list[repricer.Due]) -> list[RunRequest]:
    """One sweep over the due slots (shards of OPTIMA_SWEEP_SHARD_SIZE); each run key is made of
    its slots, so a slot runs once across daemon restarts."""
    size = load_settings().sweep_shard_size
    items = [slot_item(d.cabinet_id, d.interval_hours, d.start) for d in sorted(due, key=lambda d: d.run_key)]
    shards = [items[i : i + size] for i in range(0, len(items), size)]
    out = []
    for k, shard in enumerate(shards):
        digest = hashlib.sha256("\n".join(shard).encode()).hexdigest()[:16]
        window = min(d.slot for d in due)
        out.append(
            RunRequest(
                run_key=f"{SWEEP.name}:{digest}",
                job_name=SWEEP.name,
                run_config={"ops": {op_name(SWEEP.name): {"config": {"slots": shard, "window": window}}}},
                tags=sweep_tags(
                    repricer.QUEUE,
                    cadence=_CADENCE.name,
                    window=window,
                    shard=f"{k + 1}/{len(shards)}",
                    cabinets=len({item.split("|", 1)[0] for item in shard}),
                ),
            )
        )
    return out


@cadence_sensor(
    _CADENCE,
    default_interval_seconds=60,
    job=repricer_sweep_job,
    description="Launches a sweep over every (cabinet, rule interval) that entered a new slot of its interval, "
    "as the rules table says now.",
)
def repricer_sensor(context: SensorEvaluationContext, warehouse: Warehouse):
    try:
        with warehouse.connect() as conn:
            groups = repricer.due_groups(conn)
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read repricer_rules: {exc.__class__.__name__}: {exc}")
    launched = json.loads(context.cursor) if context.cursor else {}
    try:
        busy = (
            (
                busy_cabinets(context.instance, repricer_job.name)
                | swept_cabinets(context.instance, warehouse, SWEEP.name, items="slots")
            )
            if groups
            else set()
        )
    except (psycopg.Error, OptimaError) as exc:
        return SkipReason(f"could not read the sweeps' outcomes: {exc.__class__.__name__}: {exc}")
    due, cursor = repricer.plan_due(groups, datetime.now(tz=UTC), launched, busy)
    if not due:
        context.update_cursor(json.dumps(cursor, sort_keys=True))
        return SkipReason(f"{len(groups)} rule group(s), none entered a new slot")
    return SensorResult(run_requests=sweep_requests(due), cursor=json.dumps(cursor, sort_keys=True))
