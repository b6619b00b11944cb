"""The run queue with the cabinet gate: Dagster's QueuedRunCoordinator, plus tags on submit.

Dagster only adds ``dagster/partition/<dim>`` tags to single-partition runs; ranged backfill runs
carry range tags and ``dagster job launch`` carries only what it is given (DESIGN.md §4.4). So on
every submit, whoever launched the run (a schedule, a sensor, the UI, a backfill, the CLI,
GraphQL), this coordinator derives the run's queue and cabinet and adds the tags that
``dagster.yaml``'s ``tag_concurrency_limits`` key on, before the run is enqueued.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import DagsterRun, QueuedRunCoordinator, SubmitRunContext

from optima_pipelines.orchestration.dagster_internals import registered_instance, replace_run_queue_config
from optima_pipelines.orchestration.queues import (
    QUEUES,
    TAG_CABINET,
    TAG_QUEUE,
    TAG_QUEUE_CLASS,
    TAG_SWEEP,
    queue_for_assets,
    queue_tags,
)
from optima_pipelines.partitions import RANGE_END_TAG, RANGE_START_TAG
from optima_pipelines.settings import load_settings

PARTITION_CABINET_TAG = "dagster/partition/cabinet"
#: A WB-talking run whose cabinet cannot be derived (several cabinets in one run, or none given)
#: and that is not a sweep (whose cabinets take their own locks) is gated under this one value, so such runs at least serialise among themselves. None of our
#: definitions produce one (WB assets have no multi-partition backfill policy, WB jobs require a
#: cabinet_id): this is the fail-safe for hand-made runs.
MULTI_CABINET = "__multi__"


def _cabinet_of_key(key: str) -> str | None:
    return key.split("|", 1)[0] if "|" in key else None


def cabinet_from_run_config(run_config: Mapping[str, Any] | None) -> str | None:
    """The cabinet a job run serves when it is given as op config (``ops.<op>.config.cabinet_id``),
    as `dagster job launch` and the Launchpad do."""
    cabinets = {
        (op or {}).get("config", {}).get("cabinet_id")
        for op in ((run_config or {}).get("ops") or {}).values()
        if isinstance(op, Mapping) and isinstance(op.get("config"), Mapping)
    } - {None}
    return cabinets.pop() if len(cabinets) == 1 else None


def derive_gate_tags(
    tags: Mapping[str, str], asset_keys: list[str], run_config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The tags to add to a run so that the queue limits apply to it. Pure: unit-tested."""
    queue = QUEUES.get(tags.get(TAG_QUEUE, "")) or queue_for_assets(asset_keys)
    if queue is None:
        return {}
    cabinet = tags.get(TAG_CABINET) or tags.get(PARTITION_CABINET_TAG) or cabinet_from_run_config(run_config)
    if cabinet is None and RANGE_START_TAG in tags:
        start, end = _cabinet_of_key(tags[RANGE_START_TAG]), _cabinet_of_key(tags.get(RANGE_END_TAG, ""))
        cabinet = start if start is not None and start == end else MULTI_CABINET
    if cabinet is None and queue.talks_to_wb and TAG_SWEEP not in tags:
        cabinet = MULTI_CABINET
    wanted = queue_tags(queue.name, cabinet_id=cabinet)
    return {k: v for k, v in wanted.items() if tags.get(k) != v}


class OptimaRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator that tags runs for the cabinet gate and reads SYNC_QUEUE_CONCURRENCY and
    OPTIMA_MAX_CONCURRENT_RUNS over dagster.yaml's limits."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        asset_keys = [k.to_user_string() for k in (run.asset_selection or [])]
        extra = derive_gate_tags(run.tags, asset_keys, run.run_config)
        if extra:
            instance = registered_instance(self)
            instance.add_run_tags(run.run_id, extra)
            refreshed = instance.get_run_by_id(run.run_id)
            if refreshed is not None:
                context = SubmitRunContext(refreshed, context.workspace)
        return super().submit_run(context)

    def get_run_queue_config(self):  # type: ignore[no-untyped-def]
        config = super().get_run_queue_config()
        settings = load_settings()
        if settings.max_concurrent_runs is not None:
            config = replace_run_queue_config(config, max_concurrent_runs=settings.max_concurrent_runs)
        limit = settings.sync_queue_concurrency
        if limit is None:
            return config
        limits: list[dict[str, Any]] = []
        for item in config.tag_concurrency_limits:
            if item.get("key") == TAG_QUEUE_CLASS and item.get("value") == "sync":
                item = {**item, "limit": limit}
            limits.append(dict(item))
        return replace_run_queue_config(config, tag_concurrency_limits=limits)
