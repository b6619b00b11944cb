"""What a WB sync run records in Dagster: one materialization per partition its feeds changed.

Every run that syncs (the jobs of jobs/wb_sync.py, a sweep's cabinets, the partition assets of
assets/wb_sync.py) records what it changed here, for the UI's lineage and partitions
(docs/ARCHITECTURE.md): a `cabinet|day` partition gets its ``changes.FeedChange`` (rows_fetched /
rows_inserted / rows_updated, rows_left, trigger, request_id), a cabinet snapshot its load's total.
The re-aggregation planner does not read them: it reads the watermarks (mart/plan.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from dagster import AssetExecutionContext, AssetMaterialization, MetadataValue, OpExecutionContext

from optima_pipelines.changes import FeedChange
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.dagster_internals import log_materializations
from optima_pipelines.partitions import CABINETS_NAME, cabinet_day_key
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import today_moscow

log = get_logger(__name__)


def partition_range(day: date) -> bool:
    """Whether the Moscow day is one of the cabinet × day partitions."""
    return date.fromisoformat(load_settings().partitions_start) <= day <= today_moscow()


def dagster_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON metadata (``FeedChange.to_metadata()`` and run figures) as Dagster records it."""
    return {k: (MetadataValue.json(v) if isinstance(v, list) else v) for k, v in values.items()}


def materialization(change: FeedChange) -> AssetMaterialization:
    """The materialization of a change record: the feed's `cabinet|day` partition (a cabinet
    snapshot's: the cabinet's) with the record's metadata, as the re-aggregation sensor reads it."""
    partition = change.cabinet_id if change.day is None else cabinet_day_key(change.cabinet_id, change.day)
    return AssetMaterialization(
        asset_key=change.feed, partition=partition, metadata=dagster_metadata(change.to_metadata())
    )


def emit_days(
    context: OpExecutionContext | AssetExecutionContext,
    changes: Iterable[FeedChange],
    *,
    skip: tuple[str, date] | None = None,
) -> list[str]:
    """One materialization per change record of a cabinet × day feed (``sync.runs.feed_changes``),
    stored as one batch; returns the partition keys.

    Days outside the partitions (before OPTIMA_PARTITIONS_START) are logged, not materialized."""
    keys = []
    events = []
    for change in changes:
        assert change.day is not None, "a cabinet snapshot's record is emit_cabinet's"
        if skip == (change.feed, change.day):
            continue
        if not partition_range(change.day):
            log.info(
                "%s of %s changed on %s, outside the partitions: no materialization",
                change.feed,
                change.cabinet_id,
                change.day,
            )
            continue
        event = materialization(change)
        events.append(event)
        keys.append(str(event.partition))
    log_materializations(context, events)
    return keys


def emit_cabinet(context: OpExecutionContext | AssetExecutionContext, change: FeedChange) -> None:
    """A cabinet-partitioned snapshot (cards, prices, campaigns) changed: one materialization."""
    context.log_event(materialization(change))


def ensure_cabinet_partitions(context: OpExecutionContext | AssetExecutionContext, cabinet_ids: list[str]) -> None:
    """The cabinets may be newer than the partitions sensor's last tick: their partitions must exist
    before materializations of them are recorded."""
    known = set(context.instance.get_dynamic_partitions(CABINETS_NAME))
    missing = [c for c in dict.fromkeys(cabinet_ids) if c not in known]
    if missing:
        context.instance.add_dynamic_partitions(CABINETS_NAME, missing)
