"""What the WB sync assets and jobs (digitization, finance, ads, funnel, catalog, inventory,
autobidder-sync) share.

- ``cabinet_sync_job``: a one-op job that syncs one cabinet (``CabinetSyncConfig``): checks the
  cabinet, marks its request running, calls the sync's Dagster-free entry point (``spec.body``, a
  ``sync.runs.Sync``) with a ``SyncInput`` (a WB client on demand, and for scheduled runs a yield
  check: a user's run waits for the cabinet), records one
  materialization per changed `cabinet|day` (or cabinet) partition, and ends the request. A WB
  pause beyond the client's wait ends a scheduled run successfully (the pause is in sync_state and
  the resume sensor runs it again); a request (a person waiting) fails with the reason instead.
- ``emit_days`` / ``emit_cabinet``: the materializations, with the metadata other domains read
  (docs/ARCHITECTURE.md): rows_fetched / rows_inserted / rows_updated, trigger, request_id, and for
  the finance report affected_days.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    Config,
    DagsterInstance,
    DagsterRunStatus,
    Failure,
    JobDefinition,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    RetryPolicy,
    RunsFilter,
    job,
    multi_asset,
    op,
)
from pydantic import Field

from optima_pipelines.errors import InvalidInput
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import (
    PRIORITY_SCHEDULED,
    PRIORITY_USER,
    TAG_CABINET,
    TAG_PRIORITY,
    TAG_TRIGGER,
    queue_tags,
)
from optima_pipelines.orchestration.retries import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SCHEDULED_RETRY,
    fail_on_permanent,
    is_transient,
)
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.partitions import (
    BACKFILL_TAG,
    CABINET_DAY,
    CABINET_DIM,
    CABINETS,
    CABINETS_NAME,
    DATE_DIM,
    cabinet_day_key,
)
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import Sync, SyncInput, SyncRun, record_failure, stored_runs
from optima_pipelines.sync.state import mark_deferred
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.wb import WbClient, WbDeferred

__all__ = [
    "DEFAULT_RETRY",
    "INTERACTIVE_MAX_WAIT_SECONDS",
    "SCHEDULED_RETRY",
    "CabinetSyncConfig",
    "SyncJobSpec",
    "cabinet_and_day",
    "cabinet_sync_job",
    "emit_cabinet",
    "emit_days",
    "fail_on_permanent",
    "partition_trigger",
    "run_cabinet_sync",
    "sync_partition_asset",
]

log = get_logger(__name__)


class CabinetSyncConfig(Config):
    cabinet_id: str
    #: The request row a run serves (set by the requests sensor).
    request_id: int | None = None
    #: Days back to cover, today included, for the syncs that work on a window of days (ads, the
    #: funnel, the digitization backfill): None is their cadence's own window; more catches up a
    #: new cabinet (the demo does). WB keeps statistics 90 days (fullstats: 31 a request).
    window_days: int | None = Field(default=None, ge=1, le=90)
    #: First Moscow day to load (a user's feed import), YYYY-MM-DD.
    date_from: str | None = None

    def first_day(self) -> date | None:
        if self.date_from is None:
            return None
        try:
            return date.fromisoformat(self.date_from)
        except ValueError:
            raise InvalidInput(f"date_from {self.date_from!r} is not a date (YYYY-MM-DD)") from None


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


def dagster_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON metadata (``DayChange.to_metadata()`` and run figures) as Dagster records it."""
    return {k: (MetadataValue.json(v) if isinstance(v, list) else v) for k, v in values.items()}


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
        for day in sorted(run.changed_days | run.report_days):
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
                    asset_key=run.feed,
                    partition=key,
                    metadata=dagster_metadata(run.change(day, trigger, request_id).to_metadata()),
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
    context.log_event(
        AssetMaterialization(
            asset_key=run.feed, partition=run.cabinet_id, metadata=run.total(trigger, request_id).to_metadata()
        )
    )


def ensure_cabinet_partition(context: OpExecutionContext | AssetExecutionContext, cabinet_id: str) -> None:
    """The cabinet may be newer than the partitions sensor's last tick: its partitions must exist
    before materializations of them are recorded."""
    if cabinet_id not in context.instance.get_dynamic_partitions(CABINETS_NAME):
        context.instance.add_dynamic_partitions(CABINETS_NAME, [cabinet_id])


def lazy_client(wb: WbApi, cabinet_id: str, max_wait: float | None, stack: ExitStack) -> Callable[[], WbClient]:
    """The cabinet's WB client, opened on first use and closed with ``stack``."""
    opened: list[WbClient] = []

    def client() -> WbClient:
        if not opened:
            opened.append(stack.enter_context(wb.client(cabinet_id, max_wait)))
        return opened[0]

    return client


def user_run_waiting(instance: DagsterInstance, cabinet_id: str) -> Callable[[], bool]:
    """Whether a user's run (higher priority) waits in the queue for this cabinet: a scheduled
    load yields the cabinet at its next page boundary (the original's rule)."""

    def waiting() -> bool:
        runs = instance.get_runs(
            RunsFilter(statuses=[DagsterRunStatus.QUEUED], tags={TAG_CABINET: cabinet_id}), limit=20
        )
        return any(int(r.tags.get(TAG_PRIORITY, "0")) > PRIORITY_SCHEDULED for r in runs)

    return waiting


@dataclass(frozen=True)
class SyncJobSpec:
    """A job syncing one cabinet. ``user_trigger`` (``user_import`` or ``manual``) makes it a job
    people wait on: user priority, the interactive WB wait, default retries, and a WB pause that
    outlasts the wait fails the run (and its request) instead of deferring. ``feeds`` name the
    assets it writes (for failure figures); those in ``cabinet_partitioned`` are materialized by
    cabinet, the others by `cabinet|day`. A load that records its own failure figures (the
    digitization feeds') names no ``feeds``."""

    name: str
    queue: str
    feeds: tuple[str, ...]
    body: Sync
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

    def input(
        self,
        context: OpExecutionContext,
        config: CabinetSyncConfig,
        warehouse: Warehouse,
        wb: WbApi,
        stack: ExitStack,
        trigger: str,
    ) -> SyncInput:
        """The entry point's argument for this run: a WB client opened on first use (closed with
        ``stack``) and, for a scheduled run, the check whether to yield the cabinet to a user's run."""
        max_wait = INTERACTIVE_MAX_WAIT_SECONDS if self.user else None
        inp = SyncInput(
            connect=warehouse.connect,
            client=lazy_client(wb, config.cabinet_id, max_wait, stack),
            cabinet_id=config.cabinet_id,
            run_id=context.run_id,
            trigger=trigger,
            request_id=config.request_id,
            window_days=config.window_days,
            date_from=config.first_day(),
            options=config.model_dump(exclude={"cabinet_id", "request_id", "window_days", "date_from"}),
        )
        if not self.user:
            inp.should_yield = user_run_waiting(context.instance, config.cabinet_id)
        return inp


def run_cabinet_sync(
    spec: SyncJobSpec, context: OpExecutionContext, config: CabinetSyncConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    """The op of a cabinet sync job (see the module docstring)."""
    cabinet_id = config.cabinet_id
    trigger = run_trigger(dict(context.run.tags), spec.user_trigger or "manual")
    stack = ExitStack()
    try:
        call = spec.input(context, config, warehouse, wb, stack, trigger)
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
            if config.request_id is not None:
                outbox.mark_running(conn, config.request_id, context.run_id)
                conn.commit()
        ensure_cabinet_partition(context, cabinet_id)
        with stack:
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
        will_retry = is_transient(exc) and context.retry_number < (spec.retry.max_retries or 0)
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


# -- Partition assets -------------------------------------------------------------------------


def sync_partition_asset(
    name: str,
    group: str,
    descriptions: Mapping[str, str],
    load: Sync,
    *,
    by_day: bool = True,
    extra: Callable[[Warehouse, str, date], dict[str, Any]] | None = None,
    check: Callable[[str, date], None] | None = None,
) -> AssetsDefinition:
    """The asset(s) of one WB feed (``descriptions``: asset key → its business meaning), partitioned
    by cabinet × day (``by_day``) or by cabinet: materializing a partition runs ``load`` (the
    domain's partition entry point, given ``SyncInput.day``) with the interactive WB wait. Each
    asset gets its run's figures (a `cabinet|day` partition: its ``DayChange``); other days or
    feeds the load changed get their materializations too. A WB pause beyond the wait fails the run, naming when to try again; ``check`` may refuse a
    partition before anything is asked of WB; ``extra`` adds metadata to a day's result."""
    specs = [AssetSpec(key, group_name=group, kinds={"postgres"}, description=d) for key, d in descriptions.items()]
    own = set(descriptions)

    @multi_asset(name=name, specs=specs, partitions_def=CABINET_DAY if by_day else CABINETS, retry_policy=DEFAULT_RETRY)
    def _asset(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> Iterator[MaterializeResult]:
        day: date | None
        if by_day:
            cabinet_id, day = cabinet_and_day(context)
            where = f"{cabinet_id}|{day}"
        else:
            cabinet_id, day, where = context.partition_key, None, f"cabinet {context.partition_key}"
        if check is not None and day is not None:
            check(cabinet_id, day)
        trigger = partition_trigger(context)
        try:
            with warehouse.connect() as conn:
                get_cabinet(conn, cabinet_id)
            with ExitStack() as stack:
                inp = SyncInput(
                    connect=warehouse.connect,
                    client=lazy_client(wb, cabinet_id, INTERACTIVE_MAX_WAIT_SECONDS, stack),
                    cabinet_id=cabinet_id,
                    run_id=context.run_id,
                    trigger=trigger,
                    day=day,
                )
                runs = load(inp)
        except Exception as exc:
            fail_on_permanent(exc, f"{name} {where}")
            raise
        for run in runs:
            if run.deferred_until is not None:
                raise Failure(
                    description=f"WB paused {run.feed} of cabinet {cabinet_id} until {run.deferred_until.isoformat()} "
                    f"({run.deferred_reason}); materialize {where} again after that",
                    allow_retries=False,
                )
        for run in runs:
            if run.feed not in own:
                emit_cabinet(context, run, trigger=trigger)
            elif day is not None:
                emit_days(context, [run], trigger=trigger, skip=(run.feed, day))
        for run in runs:
            if run.feed not in own:
                continue
            if day is None:
                meta = run.total(trigger).to_metadata()
            else:
                meta = dagster_metadata(run.change(day, trigger).to_metadata())
                if extra is not None:
                    meta.update(extra(warehouse, cabinet_id, day))
            yield MaterializeResult(asset_key=run.feed, metadata={**meta, "wb_requests": run.requests})

    return _asset
