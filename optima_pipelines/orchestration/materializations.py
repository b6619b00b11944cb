"""What a WB sync run records in Dagster: one materialization per partition its feeds changed.

Every run that syncs (the jobs of jobs/wb_sync.py, a sweep's cabinets, the partition assets of
assets/wb_sync.py) records what it changed here, with the metadata other domains read
(docs/ARCHITECTURE.md): a `cabinet|day` partition gets its ``sync.changes.DayChange`` (rows_fetched /
rows_inserted / rows_updated, trigger, request_id, affected_days...), a cabinet snapshot its run's
total. sensors/rnp.py reads them back for the re-aggregation (orchestration/rnp_plan.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from dagster import AssetExecutionContext, AssetMaterialization, MetadataValue, OpExecutionContext

from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.dagster_internals import log_materializations
from optima_pipelines.partitions import CABINETS_NAME, cabinet_day_key
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import FeedLoad
from optima_pipelines.timeutil import today_moscow

log = get_logger(__name__)


def partition_range(day: date) -> bool:
    """Whether the Moscow day is one of the cabinet × day partitions."""
    return date.fromisoformat(load_settings().partitions_start) <= day <= today_moscow()


def dagster_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON metadata (``DayChange.to_metadata()`` and run figures) as Dagster records it."""
    return {k: (MetadataValue.json(v) if isinstance(v, list) else v) for k, v in values.items()}


def emit_days(
    context: OpExecutionContext | AssetExecutionContext,
    runs: Iterable[FeedLoad],
    *,
    trigger: str,
    request_id: int | None = None,
    skip: tuple[str, date] | None = None,
) -> list[str]:
    """One materialization per (feed, changed day) of a cabinet × day feed, stored as one batch;
    returns the partition keys.

    Days outside the partitions (before OPTIMA_PARTITIONS_START) are logged, not materialized."""
    keys = []
    events = []
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
            events.append(
                AssetMaterialization(
                    asset_key=run.feed,
                    partition=key,
                    metadata=dagster_metadata(run.change(day, trigger, request_id).to_metadata()),
                )
            )
            keys.append(str(key))
    log_materializations(context, events)
    return keys


def emit_cabinet(
    context: OpExecutionContext | AssetExecutionContext,
    run: FeedLoad,
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
