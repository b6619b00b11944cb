"""Fan-out over cabinets for scheduled work, with the original's rules.

- only cabinets whose status is active (the original's «Активен»);
- not cabinets with a live user import (its run has the cabinet; scheduled work would only queue behind it);
- not cabinets that already have a run of the same job queued or running (schedules never pile up);
- not cabinets held in a WB pause (resume_at in the future): they resume on their own;
- one run per cabinet per cadence window: the run key is built from the window, so a tick that is
  evaluated twice (daemon restart) requests nothing new.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from optima_pipelines.orchestration.queues import TAG_CABINET
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.warehouse.cabinets import list_cabinets
from optima_pipelines.warehouse.requests import live_user_import_cabinets

IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


@dataclass(frozen=True)
class FanoutPlan:
    launch: list[str]
    skipped: dict[str, str]  # cabinet -> why


def plan_fanout(
    active: Iterable[str],
    live_imports: set[str],
    busy: set[str],
    paused: set[str] = frozenset(),  # type: ignore[assignment]
) -> FanoutPlan:
    launch: list[str] = []
    skipped: dict[str, str] = {}
    for cabinet in sorted(active):
        if cabinet in live_imports:
            skipped[cabinet] = "live user import"
        elif cabinet in busy:
            skipped[cabinet] = "a run of this job is already queued or running"
        elif cabinet in paused:
            skipped[cabinet] = "paused by a WB rate limit"
        else:
            launch.append(cabinet)
    return FanoutPlan(launch, skipped)


def active_cabinets(warehouse: Warehouse) -> tuple[list[str], set[str]]:
    """Active cabinet ids and the cabinets with a live user import (one connection)."""
    with warehouse.connect() as conn:
        active = [c.id for c in list_cabinets(conn, status="active")]
        live = live_user_import_cabinets(conn)
    return active, live


def busy_cabinets(instance: DagsterInstance, job_name: str) -> set[str]:
    """Cabinets with a run of this job queued or running."""
    runs = instance.get_runs(RunsFilter(job_name=job_name, statuses=IN_FLIGHT))
    return {r.tags[TAG_CABINET] for r in runs if TAG_CABINET in r.tags}
