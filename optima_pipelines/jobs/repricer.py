"""repricer-schedule: apply a cabinet's repricer rules of one interval for one slot (engines/repricer.py).

``repricer_sensor`` launches one sweep (``repricer_sweep``) per tick over every (cabinet, rule
interval) that entered a new slot; ``repricer`` does one of them (the Launchpad, a retry). Each
refreshes the cabinet's prices from WB (the catalog's own prices sync, so ``prices`` and
``price_history`` stay current), decides each ruled product once per slot, and uploads the changes
in tasks of ≤ 1000, each followed to WB's final status. Outcomes: ``repricer_outcomes``; WB actions: ``engine_actions``.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from datetime import datetime

from dagster import Config, Failure, OpExecutionContext, job, op
from pydantic import Field

from optima_pipelines import logs
from optima_pipelines.engines import repricer
from optima_pipelines.errors import OptimaError, UnknownCabinet
from optima_pipelines.jobs.wb_sync import CabinetOutcome, SweepJob, drive_sweep, locked_client, under_lock
from optima_pipelines.orchestration.queues import queue_tags
from optima_pipelines.orchestration.retries import SCHEDULED_RETRY, describe, fail_on_permanent, is_transient
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import catalog
from optima_pipelines.warehouse.cabinet_lock import CabinetLock, LockSession
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.wb import WbClient, WbDeferred, WbError

JOB = "repricer"
SWEEP = SweepJob("repricer_sweep", repricer.QUEUE)


class RepricerConfig(Config):
    cabinet_id: str
    interval_hours: int = Field(ge=1, le=168)
    #: The slot's start (ISO 8601, UTC), from the sensor; the decisions are made once per slot.
    slot_start: str


class PricesPaused(OptimaError):
    """WB paused the prices read the decisions need: the slot is decided later (a retry, the next tick)."""


def reprice(warehouse: Warehouse, client: WbClient, cabinet_id: str, hours: int, start: datetime, run_id: str) -> dict:
    """One (cabinet, interval, slot): refresh the prices, decide each ruled product once per slot,
    upload and follow the changes; the counts of what happened (empty: no enabled rules any more)."""
    slot = repricer.slot_key(hours, start)
    with warehouse.connect() as conn:
        rules = repricer.load_rules(conn, cabinet_id, hours)
        if not rules:
            return {}
        if not repricer.slot_planned(conn, cabinet_id, slot):
            prices_run, _ = catalog.sync_prices(
                warehouse.connect, client, cabinet_id, run_id=run_id, trigger="scheduled"
            )
            if prices_run.deferred_until is not None:
                raise PricesPaused(
                    f"repricer {cabinet_id} {slot}: WB paused the prices read until {prices_run.deferred_until}; "
                    "decisions need current prices"
                )
            repricer.plan_slot(conn, cabinet_id, slot, rules, run_id)
            conn.commit()
        return repricer.apply_slot(conn, client, cabinet_id, slot, run_id)


@op(name=op_name(JOB), retry_policy=SCHEDULED_RETRY, description="Apply one cabinet's repricer rules for one slot.")
def repricer_op(context: OpExecutionContext, config: RepricerConfig, warehouse: Warehouse, wb: WbApi) -> None:
    cabinet_id, start = config.cabinet_id, datetime.fromisoformat(config.slot_start)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with locked_client(warehouse, wb, cabinet_id) as client:
            counts = reprice(warehouse, client, cabinet_id, config.interval_hours, start, context.run_id)
    except PricesPaused as paused:
        raise Failure(description=str(paused)) from None  # retried by the policy
    except Exception as exc:
        fail_on_permanent(exc, f"repricer of cabinet {cabinet_id}")
        raise
    context.log.info(f"repricer {cabinet_id} {repricer.slot_key(config.interval_hours, start)}: {counts or 'no rules'}")


def slot_item(cabinet_id: str, hours: int, start: datetime) -> str:
    """A sweep's item: one (cabinet, interval, slot start)."""
    return f"{cabinet_id}|{hours}|{start.isoformat()}"


def _slot_work(item: str, run_id: str, locks: LockSession, warehouse: Warehouse, wb: WbApi) -> CabinetOutcome:
    cabinet_id, hours, start = item.split("|", 2)

    def work(_: CabinetLock) -> CabinetOutcome:
        try:
            with warehouse.connect() as conn:
                if not get_cabinet(conn, cabinet_id).active:
                    return CabinetOutcome(cabinet_id, "skipped", "the cabinet is not active now")
            with wb.client(cabinet_id) as client:
                counts = reprice(warehouse, client, cabinet_id, int(hours), datetime.fromisoformat(start), run_id)
        except (WbDeferred, PricesPaused) as paused:
            return CabinetOutcome(
                cabinet_id, "deferred", f"{paused}; a later tick of the slot decides", notes={"slot": item}
            )
        except Exception as exc:
            reason = logs.redact(f"{exc.__class__.__name__}: {describe(exc)}")
            if is_transient(exc):
                return CabinetOutcome(cabinet_id, "retrying", f"{reason}; a later tick of the slot decides")
            own = isinstance(exc, WbError | UnknownCabinet)
            return CabinetOutcome(cabinet_id, "failed", reason, systemic=not own)
        return CabinetOutcome(cabinet_id, "succeeded", None, notes={"hours": int(hours), **counts})

    return under_lock(cabinet_id, run_id, locks, work)


class RepricerSweepConfig(Config):
    #: The due slots, ``<cabinet>|<interval hours>|<slot start, ISO 8601>`` each (``slot_item``).
    slots: list[str] = Field(min_length=1)
    window: str = ""


@op(name=op_name(SWEEP.name), description="Apply the repricer rules of every due (cabinet, interval) slot.")
def repricer_sweep_op(context: OpExecutionContext, config: RepricerSweepConfig, warehouse: Warehouse, wb: WbApi):
    drive_sweep(
        context,
        warehouse,
        SWEEP,
        list(config.slots),
        lambda item, locks: _slot_work(item, context.run_id, locks, warehouse, wb),
        window=config.window,
    )


@job(
    name=SWEEP.name,
    tags=queue_tags(repricer.QUEUE),
    description="repricer-schedule for every (cabinet, rule interval) that entered a new slot, in one run: each "
    "cabinet under its lock, as repricer does for one.",
)
def repricer_sweep_job() -> None:
    repricer_sweep_op()


@job(
    name=JOB,
    tags=queue_tags(repricer.QUEUE),
    description="repricer-schedule: a cabinet's repricer rules of one interval, applied through WB's price upload "
    "tasks (each polled to its final status); per-product outcomes in repricer_outcomes.",
)
def repricer_job() -> None:
    repricer_op()
