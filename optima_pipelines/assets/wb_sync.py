"""What the WB sync assets share: the partition asset factory and the materializations.

- ``sync_partition_asset``: the asset(s) of one WB feed; materializing a `cabinet|day` (or cabinet)
  partition runs the domain's partition entry point (a ``sync.runs.Sync``) under the cabinet lock.
- ``emit_days`` / ``emit_cabinet``: the materializations every sync run records (these assets, the
  jobs of jobs/wb_sync.py), with the metadata other domains read (docs/ARCHITECTURE.md):
  rows_fetched / rows_inserted / rows_updated, trigger, request_id, and for the finance report
  affected_days.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from datetime import date
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    multi_asset,
)

from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, INTERACTIVE_MAX_WAIT_SECONDS, fail_on_permanent
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
from optima_pipelines.sync.runs import Sync, SyncInput, SyncRun, stored_runs
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinet_lock import held
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.wb import WbClient

log = get_logger(__name__)


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


def ensure_cabinet_partitions(context: OpExecutionContext | AssetExecutionContext, cabinet_ids: list[str]) -> None:
    """The cabinets may be newer than the partitions sensor's last tick: their partitions must exist
    before materializations of them are recorded."""
    known = set(context.instance.get_dynamic_partitions(CABINETS_NAME))
    missing = [c for c in dict.fromkeys(cabinet_ids) if c not in known]
    if missing:
        context.instance.add_dynamic_partitions(CABINETS_NAME, missing)


def lazy_client(wb: WbApi, cabinet_id: str, max_wait: float | None, stack: ExitStack) -> Callable[[], WbClient]:
    """The cabinet's WB client, opened on first use and closed with ``stack``."""
    opened: list[WbClient] = []

    def client() -> WbClient:
        if not opened:
            opened.append(stack.enter_context(wb.client(cabinet_id, max_wait)))
        return opened[0]

    return client


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
    feeds the load changed get their materializations too, and so do the days of pages a failing load
    committed. A WB pause beyond the wait fails the run, naming when to try again; ``check`` may refuse a
    partition before anything is asked of WB; ``extra`` adds metadata to a day's result, and the load's
    ``SyncInput.notes`` to every result."""
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
                stack.enter_context(held(warehouse.connect, cabinet_id, load_settings().cabinet_lock_wait_seconds))
                inp = SyncInput(
                    connect=warehouse.connect,
                    client=lazy_client(wb, cabinet_id, INTERACTIVE_MAX_WAIT_SECONDS, stack),
                    cabinet_id=cabinet_id,
                    run_id=context.run_id,
                    trigger=trigger,
                    day=day,
                    backfill_id=context.run.tags.get(BACKFILL_TAG),
                )
                runs = load(inp)
        except Exception as exc:
            if day is not None:  # pages committed before the failure: report the days they changed
                emit_days(context, stored_runs(exc), trigger=trigger)
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
            meta.update(dagster_metadata(inp.notes))
            yield MaterializeResult(asset_key=run.feed, metadata={**meta, "wb_requests": run.requests})

    return _asset
