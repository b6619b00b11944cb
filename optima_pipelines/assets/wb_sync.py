"""What the WB sync assets and jobs (finance, ads, funnel, catalog, inventory, autobidder-sync) share.

- ``cabinet_sync_job``: a one-op job that syncs one cabinet (``CabinetSyncConfig``): checks the
  cabinet, marks its request running, hands a WB client to the domain's ``body``, records one
  materialization per changed `cabinet|day` (or cabinet) partition, and ends the request. A WB
  pause beyond the client's wait ends a scheduled run successfully (the pause is in sync_state and
  the resume sensor runs it again); a request (a person waiting) fails with the reason instead.
- ``emit_days`` / ``emit_cabinet``: the materializations, with the metadata other domains read
  (docs/ARCHITECTURE.md): rows_fetched / rows_inserted / rows_updated, trigger, request_id, and for
  the finance report affected_days.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    Config,
    Failure,
    JobDefinition,
    MetadataValue,
    OpExecutionContext,
    RetryPolicy,
    job,
    op,
)
from pydantic import Field

from optima_pipelines import requests as outbox
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.logs import get_logger
from optima_pipelines.partitions import BACKFILL_TAG, CABINET_DIM, CABINETS_NAME, DATE_DIM, cabinet_day_key
from optima_pipelines.queues import PRIORITY_USER, TAG_TRIGGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.retries import DEFAULT_RETRY, INTERACTIVE_MAX_WAIT_SECONDS, SCHEDULED_RETRY, fail_on_permanent
from optima_pipelines.runconfig import op_name
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import SyncRun, record_failure, stored_runs
from optima_pipelines.sync.state import mark_deferred
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import WbClient, WbDeferred, WbError

__all__ = [
    "DEFAULT_RETRY",
    "INTERACTIVE_MAX_WAIT_SECONDS",
    "SCHEDULED_RETRY",
    "CabinetSyncConfig",
    "SyncCall",
    "SyncJobSpec",
    "cabinet_and_day",
    "cabinet_sync_job",
    "emit_cabinet",
    "emit_days",
    "fail_on_permanent",
    "partition_trigger",
    "run_cabinet_sync",
]

log = get_logger(__name__)


class CabinetSyncConfig(Config):
    cabinet_id: str
    #: The request row a run serves (set by the requests sensor).
    request_id: int | None = None
    #: Days back to cover, today included, for the syncs that work on a window of days (ads, the
    #: funnel): None is their cadence's own window; more catches up a new cabinet (the demo does).
    window_days: int | None = Field(default=None, ge=1, le=31)


def run_trigger(tags: dict[str, str], user_trigger: str) -> str:
    """The trigger metadata of a job run: scheduled, the request's own, or manual (Launchpad, CLI)."""
    return {"schedule": "scheduled", "user": user_trigger, "backfill": "backfill"}.get(
        tags.get(TAG_TRIGGER, ""), "manual"
    )


def partition_trigger(context: AssetExecutionContext) -> str:
    return "backfill" if BACKFILL_TAG in context.run.tags else "manual"


def partition_range(day: date) -> bool:
    """Whether the Moscow day is one of the cabinet × day partitions."""
    return date.fromisoformat(load_settings().partitions_start) <= day <= today_moscow()


def cabinet_and_day(context: AssetExecutionContext) -> tuple[str, date]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys[CABINET_DIM], date.fromisoformat(keys[DATE_DIM])


def _metadata(extra: dict[str, Any], trigger: str, request_id: int | None) -> dict[str, Any]:
    meta = {k: (MetadataValue.json(v) if isinstance(v, list) else v) for k, v in extra.items()}
    meta["trigger"] = trigger
    if request_id is not None:
        meta["request_id"] = request_id
    return meta


def emit_days(
    context: OpExecutionContext | AssetExecutionContext,
    runs: Iterable[SyncRun],
    *,
    trigger: str,
    request_id: int | None = None,
    skip: tuple[str, date] | None = None,
) -> list[str]:
    """One materialization per (feed, changed day) of a cabinet × day feed; returns the partition keys.

    Days outside the partitions (before OPTIMA_PARTITIONS_START) are logged, not materialized."""
    keys = []
    for run in runs:
        for day in sorted(run.changed_days):
            if skip == (run.feed, day):
                continue
            if not partition_range(day):
                log.info(
                    "%s of %s changed on %s, outside the partitions: no materialization", run.feed, run.cabinet_id, day
                )
                continue
            key = cabinet_day_key(run.cabinet_id, day)
            context.log_event(
                AssetMaterialization(
                    asset_key=run.feed, partition=key, metadata=_metadata(run.day_metadata(day), trigger, request_id)
                )
            )
            keys.append(str(key))
    return keys


def emit_cabinet(
    context: OpExecutionContext | AssetExecutionContext,
    run: SyncRun,
    *,
    trigger: str,
    request_id: int | None = None,
) -> None:
    """A cabinet-partitioned snapshot (cards, prices, campaigns) changed: one materialization."""
    if not run.changed:
        return
    extra = {
        "rows_fetched": run.rows_fetched,
        "rows_inserted": run.merge.inserted,
        "rows_updated": run.merge.updated,
        "rows_deleted": run.rows_deleted,
    }
    context.log_event(
        AssetMaterialization(
            asset_key=run.feed, partition=run.cabinet_id, metadata=_metadata(extra, trigger, request_id)
        )
    )


def ensure_cabinet_partition(context: OpExecutionContext | AssetExecutionContext, cabinet_id: str) -> None:
    """The cabinet may be newer than the partitions sensor's last tick: its partitions must exist
    before materializations of them are recorded."""
    if cabinet_id not in context.instance.get_dynamic_partitions(CABINETS_NAME):
        context.instance.add_dynamic_partitions(CABINETS_NAME, [cabinet_id])


@dataclass
class SyncCall:
    """What a sync job's body gets: the run, the cabinet, the warehouse and a WB client on demand."""

    context: OpExecutionContext
    config: CabinetSyncConfig
    warehouse: Warehouse
    wb: WbApi
    trigger: str
    max_wait_seconds: float | None
    #: Extra facts for the request's result (e.g. lines of an upload the API already had).
    notes: dict[str, Any] = field(default_factory=dict)
    stack: ExitStack = field(default_factory=ExitStack)
    _client: WbClient | None = None

    @property
    def run_id(self) -> str:
        return self.context.run_id

    @property
    def cabinet_id(self) -> str:
        return self.config.cabinet_id

    @property
    def request_id(self) -> int | None:
        return self.config.request_id

    def client(self) -> WbClient:
        """The cabinet's WB client, opened on first use and closed when the run ends."""
        if self._client is None:
            self._client = self.stack.enter_context(self.wb.client(self.cabinet_id, self.max_wait_seconds))
        return self._client


#: A job body: syncs one cabinet and returns what each feed did.
Body = Callable[[SyncCall], list[SyncRun]]


@dataclass(frozen=True)
class SyncJobSpec:
    """A job syncing one cabinet. ``user_trigger`` (``user_import`` or ``manual``) makes it a job
    people wait on: user priority, the interactive WB wait, default retries, and a WB pause that
    outlasts the wait fails the run (and its request) instead of deferring. ``feeds`` name the
    assets it writes (for failure figures); those in ``cabinet_partitioned`` are materialized by
    cabinet, the others by `cabinet|day`."""

    name: str
    queue: str
    feeds: tuple[str, ...]
    body: Body
    description: str
    state_feed: str | None = None
    user_trigger: str | None = None
    cabinet_partitioned: tuple[str, ...] = ()

    @property
    def user(self) -> bool:
        return self.user_trigger is not None

    @property
    def retry(self) -> RetryPolicy:
        return DEFAULT_RETRY if self.user else SCHEDULED_RETRY

    @property
    def tags(self) -> dict[str, str]:
        return queue_tags(self.queue, priority=PRIORITY_USER) if self.user else queue_tags(self.queue)


def run_cabinet_sync(
    spec: SyncJobSpec, context: OpExecutionContext, config: CabinetSyncConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    """The op of a cabinet sync job (see the module docstring)."""
    cabinet_id = config.cabinet_id
    trigger = run_trigger(dict(context.run.tags), spec.user_trigger or "manual")
    call = SyncCall(context, config, warehouse, wb, trigger, INTERACTIVE_MAX_WAIT_SECONDS if spec.user else None)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
            if config.request_id is not None:
                outbox.mark_running(conn, config.request_id, context.run_id)
                conn.commit()
        ensure_cabinet_partition(context, cabinet_id)
        with call.stack:
            runs = spec.body(call)
    except WbDeferred as deferred:  # a pause before any feed could store its state
        if spec.state_feed is not None and not spec.user:
            with warehouse.connect() as conn, conn.transaction():
                mark_deferred(conn, cabinet_id, spec.state_feed, deferred.resume_at, str(deferred))
            context.log.info(f"{spec.name} of {cabinet_id} deferred: {deferred}")
            return
        raise Failure(description=f"{spec.name} of cabinet {cabinet_id}: {deferred}", allow_retries=False) from None
    except Exception as exc:
        # Pages committed before the failure stay: report the days they changed (the retry, or the
        # next run, resumes after them).
        stored = [r for r in stored_runs(exc) if r.feed not in spec.cabinet_partitioned]
        emit_days(context, stored, trigger=trigger, request_id=config.request_id)
        will_retry = (
            isinstance(exc, WbError) and exc.is_transient and context.retry_number < (spec.retry.max_retries or 0)
        )
        if not will_retry:
            failed = [SyncRun(spec.queue, f, cabinet_id, context.run_id, trigger) for f in spec.feeds]
            record_failure(warehouse.connect, failed, exc)
        fail_on_permanent(exc, f"{spec.name} of cabinet {cabinet_id}")
        raise
    for run in runs:
        if run.feed in spec.cabinet_partitioned:
            emit_cabinet(context, run, trigger=trigger, request_id=config.request_id)
    emit_days(
        context,
        [r for r in runs if r.feed not in spec.cabinet_partitioned],
        trigger=trigger,
        request_id=config.request_id,
    )
    result: dict[str, Any] = {run.feed: run.summary() for run in runs} | call.notes
    context.log.info(f"{spec.name} of {cabinet_id}: {result}")
    deferred_runs = [r for r in runs if r.deferred_until is not None]
    if spec.user and deferred_runs:
        first = deferred_runs[0]
        raise Failure(
            description=f"WB paused {spec.name} of cabinet {cabinet_id} until {first.deferred_until}: "
            f"{first.deferred_reason}; what was loaded before stays",
            allow_retries=False,
        )
    if config.request_id is not None:
        with warehouse.connect() as conn:
            outbox.mark_succeeded(conn, config.request_id, context.run_id, result)
            conn.commit()


def cabinet_sync_job(spec: SyncJobSpec) -> JobDefinition:
    """The one-op job of ``spec``, configured by ``CabinetSyncConfig``."""

    @op(name=op_name(spec.name), retry_policy=spec.retry, description=spec.description)
    def _op(context: OpExecutionContext, config: CabinetSyncConfig, warehouse: Warehouse, wb: WbApi) -> None:
        run_cabinet_sync(spec, context, config, warehouse, wb)

    @job(name=spec.name, tags=spec.tags, description=spec.description)
    def _job() -> None:
        _op()

    return _job
