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

from dagster import DagsterRun, Field, QueuedRunCoordinator, SubmitRunContext

from optima_pipelines.orchestration.dagster_internals import registered_instance, replace_run_queue_config
from optima_pipelines.orchestration.queues import (
    LANE_SCHEDULED,
    LANE_USER,
    QUEUES,
    TAG_CABINET,
    TAG_LANE,
    TAG_QUEUE,
    TAG_QUEUE_CLASS,
    TAG_SWEEP,
    TAG_TRIGGER,
    queue_for_assets,
    queue_tags,
)
from optima_pipelines.partitions import RANGE_END_TAG, RANGE_START_TAG
from optima_pipelines.settings import load_settings

PARTITION_CABINET_TAG = "dagster/partition/cabinet"
#: Our own setting in dagster.yaml: the queue pass's interval in fractions of a second.
DEQUEUE_EVERY = "dequeue_every_seconds"
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


#: Triggers of the runs nobody waits for; every other run (the UI, the CLI, a backfill, a request) is
#: a person's or a request's.
SCHEDULED_TRIGGERS = frozenset({"schedule", "sensor"})


#: Dagster's own tags on the runs its schedules and sensors create.
DAGSTER_LAUNCHER_TAGS = ("dagster/schedule_name", "dagster/sensor_name")


def run_lane(tags: Mapping[str, str]) -> str:
    """The run's lane: its own tag (a request's runs carry the user lane although a sensor creates
    them), else scheduled for sweeps and what schedules and sensors launch, else user."""
    if tags.get(TAG_LANE) in (LANE_USER, LANE_SCHEDULED):
        return tags[TAG_LANE]
    scheduled = (
        TAG_SWEEP in tags
        or tags.get(TAG_TRIGGER) in SCHEDULED_TRIGGERS
        or any(tag in tags for tag in DAGSTER_LAUNCHER_TAGS)
    )
    return LANE_SCHEDULED if scheduled else LANE_USER


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
    wanted = queue_tags(queue.name, cabinet_id=cabinet, lane=run_lane(tags))
    return {k: v for k, v in wanted.items() if tags.get(k) != v}


class OptimaRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator that tags runs for the cabinet gate and their lane, and reads
    SYNC_QUEUE_CONCURRENCY and OPTIMA_MAX_CONCURRENT_RUNS over dagster.yaml's limits. The scheduled
    lane gets what the user lane leaves of the ceiling (unless dagster.yaml limits it itself)."""

    def __init__(self, *args: Any, dequeue_every_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dequeue_every_seconds = dequeue_every_seconds

    @classmethod
    def config_type(cls):  # type: ignore[no-untyped-def]
        dagster_fields = super().config_type()
        assert isinstance(dagster_fields, dict)  # QueuedRunCoordinator's fields, by name
        return {
            **dagster_fields,
            DEQUEUE_EVERY: Field(
                float,
                is_required=False,
                description="Seconds between the daemon's queue passes, below Dagster's whole seconds "
                "(its loop waits in 0.5-s steps, so 0.5 is the floor); replaces dequeue_interval_seconds.",
            ),
        }

    @classmethod
    def from_config_value(cls, inst_data, config_value):  # type: ignore[no-untyped-def]
        coordinator = super().from_config_value(
            inst_data, {k: v for k, v in config_value.items() if k != DEQUEUE_EVERY}
        )
        coordinator._dequeue_every_seconds = config_value.get(DEQUEUE_EVERY)
        return coordinator

    @property
    def dequeue_interval_seconds(self) -> float:  # type: ignore[override]
        # The daemon builds its queue loop with this interval (IntervalDaemon takes any number).
        return self._dequeue_every_seconds or super().dequeue_interval_seconds

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
        limits = [dict(item) for item in config.tag_concurrency_limits]
        for item in limits:
            if settings.sync_queue_concurrency is not None and _limits(item, TAG_QUEUE_CLASS, "sync"):
                item["limit"] = settings.sync_queue_concurrency
        user_lane = [int(item["limit"]) for item in limits if _limits(item, TAG_LANE, LANE_USER)]
        if user_lane and not any(_limits(item, TAG_LANE, LANE_SCHEDULED) for item in limits):
            # What the user lane leaves of the ceiling is the scheduled lane's.
            scheduled = max(1, config.max_concurrent_runs - user_lane[0])
            limits.append({"key": TAG_LANE, "value": LANE_SCHEDULED, "limit": scheduled})
        return replace_run_queue_config(config, tag_concurrency_limits=limits)


def _limits(item: Mapping[str, Any], key: str, value: str) -> bool:
    return item.get("key") == key and item.get("value") == value
