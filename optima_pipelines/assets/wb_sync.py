"""The partition asset factory of the WB syncs (``sync_partition_asset``): the asset(s) of one WB
feed; materializing a `cabinet|day` (or cabinet) partition runs the domain's partition entry point (a
``sync.runs.Sync``) under the cabinet lock and records what it changed as every sync run does
(orchestration/materializations.py).
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from datetime import date
from typing import Any

from dagster import AssetExecutionContext, AssetsDefinition, AssetSpec, Failure, MaterializeResult, multi_asset

from optima_pipelines.orchestration.materializations import dagster_metadata, emit_cabinet, emit_days
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, INTERACTIVE_MAX_WAIT_SECONDS, fail_on_permanent
from optima_pipelines.partitions import BACKFILL_TAG, CABINET_DAY, CABINET_DIM, CABINETS, DATE_DIM
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi, lazy_client
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import Sync, SyncInput, feed_changes, run_sync, stored_runs
from optima_pipelines.warehouse.cabinet_lock import held
from optima_pipelines.warehouse.cabinets import get_cabinet


def partition_trigger(context: AssetExecutionContext) -> str:
    return "backfill" if BACKFILL_TAG in context.run.tags else "manual"


def cabinet_and_day(context: AssetExecutionContext) -> tuple[str, date]:
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys[CABINET_DIM], date.fromisoformat(keys[DATE_DIM])


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
    asset gets its run's figures (a `cabinet|day` partition: its ``FeedChange``); other days or
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
                runs = run_sync(load, inp)
        except Exception as exc:
            if day is not None:  # pages committed before the failure: report the days they changed
                emit_days(context, feed_changes(stored_runs(exc), trigger))
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
                if run.changed:
                    emit_cabinet(context, run.total(trigger))
            elif day is not None:
                emit_days(context, run.changes(trigger), skip=(run.feed, day))
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
