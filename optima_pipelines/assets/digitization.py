"""Digitization: WB orders and sales/returns, by cabinet × Moscow day (the `digitization-sync` queue).

The assets `wb_orders` and `wb_sales` are the tables of the same names; each `cabinet|day`
partition holds the rows whose Moscow `date` is that day. Materializing a partition reloads that
day from WB. The increment, the nightly backfill and user imports load WB's change feed instead
and record a materialization of every `cabinet|day` partition whose rows changed, so the partition
grid and the РНП re-aggregation see exactly which days changed, old ones included.
"""

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    Config,
    DagsterInstance,
    DagsterRunStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    RetryPolicy,
    RunsFilter,
    asset,
    job,
    op,
)

from optima_pipelines import requests as outbox
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.errors import InvalidInput
from optima_pipelines.partitions import BACKFILL_TAG, CABINET_DAY, CABINET_DIM, CABINETS_NAME, DATE_DIM, cabinet_day_key
from optima_pipelines.queues import (
    PRIORITY_SCHEDULED,
    PRIORITY_USER,
    TAG_CABINET,
    TAG_PRIORITY,
    TAG_TRIGGER,
    queue_tags,
)
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.retries import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SCHEDULED_RETRY,
    fail_on_permanent,
)
from optima_pipelines.runconfig import op_name
from optima_pipelines.sync import digitization as dg
from optima_pipelines.sync.runs import stored_runs
from optima_pipelines.timeutil import today_moscow

QUEUE = dg.QUEUE


def _day_metadata(run: dg.FeedRun, day: date) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "rows_inserted": run.merge.inserted_by_day.get(day, 0),
        "rows_updated": run.merge.updated_by_day.get(day, 0),
    }
    if day in run.finance_days:  # report lines these orders move here leave these days
        meta["finance_days"] = MetadataValue.json(sorted(d.isoformat() for d in run.finance_days[day]))
    return meta


def _feed_asset(feed: dg.Feed, description: str):
    @asset(
        name=feed.asset,
        partitions_def=CABINET_DAY,
        group_name="digitization",
        kinds={"postgres"},
        retry_policy=DEFAULT_RETRY,
        description=description,
    )
    def _asset(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
        keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
        cabinet_id, day = keys[CABINET_DIM], date.fromisoformat(keys[DATE_DIM])
        try:
            with warehouse.connect() as conn:
                get_cabinet(conn, cabinet_id)
            plan, run = dg.load_partition(
                warehouse.connect,
                lambda: wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS),
                feed,
                cabinet_id,
                day,
                backfill_id=context.run.tags.get(BACKFILL_TAG),
                run_id=context.run_id,
            )
        except Exception as exc:
            # A range fetch that failed after some pages: report the days they changed.
            _record_changes(context, cabinet_id, stored_runs(exc), trigger="backfill", whole_period=[], request_id=None)
            fail_on_permanent(exc, f"{feed.asset} {cabinet_id}|{day}")
            raise
        if run.deferred_until is not None:
            raise Failure(
                description=f"WB paused {feed.name} requests of cabinet {cabinet_id} until "
                f"{run.deferred_until.isoformat()} ({run.deferred_reason}); nothing was loaded for {day}. "
                "Materialize the partition again after that time.",
                allow_retries=False,
            )
        # A range fetch also refreshed other days: record them as materialized too.
        for other in sorted(run.changed_days - {day}):
            context.log_event(
                AssetMaterialization(
                    asset_key=feed.asset,
                    partition=cabinet_day_key(cabinet_id, other),
                    metadata={**_day_metadata(run, other), "trigger": "backfill", "by_run_of_partition": str(day)},
                )
            )
        return MaterializeResult(
            metadata={
                "fetch": plan.mode,
                "wb_pages": run.pages,
                "rows_fetched": run.rows_fetched,
                **_day_metadata(run, day),
                "rows_in_day": dg.day_rows(warehouse.connect, feed, cabinet_id, day),
                "changed_days": MetadataValue.json(sorted(d.isoformat() for d in run.changed_days)),
                "trigger": "backfill" if BACKFILL_TAG in context.run.tags else "manual",
            }
        )

    return _asset


wb_orders = _feed_asset(
    dg.ORDERS,
    "WB orders (statistics /api/v1/supplier/orders): one row per order (srid) with its current state, "
    "cancellation included, in the partition of the order's Moscow day.",
)
wb_sales = _feed_asset(
    dg.SALES,
    "WB sales and returns (statistics /api/v1/supplier/sales): one row per saleID (S… sale, R… return), "
    "in the partition of the sale's Moscow day.",
)


# -- Change-feed jobs: the increment, the nightly backfill, user imports ------------------------


class FeedSyncConfig(Config):
    cabinet_id: str
    #: First Moscow day to load (imports); None: the stored cursor (increment) or the window.
    date_from: str | None = None
    #: Days to load, today included (the nightly backfill: WB's 90).
    window_days: int | None = None
    request_id: int | None = None


def _record_changes(
    context: OpExecutionContext | AssetExecutionContext,
    cabinet_id: str,
    runs: list[dg.FeedRun],
    *,
    trigger: str,
    whole_period: list[date],
    request_id: int | None,
) -> None:
    """One materialization per (feed, changed day), plus every day of an import's whole period."""
    for run in runs:
        days = sorted(run.changed_days | set(whole_period))
        for day in days:
            metadata: dict[str, Any] = {**_day_metadata(run, day), "trigger": trigger}
            if request_id is not None:
                metadata["request_id"] = request_id
            context.log_event(
                AssetMaterialization(
                    asset_key=run.feed.asset, partition=cabinet_day_key(cabinet_id, day), metadata=metadata
                )
            )


def _sync(
    context: OpExecutionContext, config: FeedSyncConfig, warehouse: Warehouse, wb: WbApi, mode: str
) -> dict[str, Any]:
    cabinet_id = config.cabinet_id
    with warehouse.connect() as conn:
        get_cabinet(conn, cabinet_id)  # UnknownCabinet: a clear, permanent failure
        if mode == "import" and config.request_id is not None:
            outbox.mark_running(conn, config.request_id, context.run_id)
            conn.commit()
    # The cabinet may be new since the partitions sensor last ran: its partitions must exist
    # before materializations of them are recorded.
    if cabinet_id not in context.instance.get_dynamic_partitions(CABINETS_NAME):
        context.instance.add_dynamic_partitions(CABINETS_NAME, [cabinet_id])

    today = today_moscow()
    trigger = {"increment": "scheduled", "backfill": "scheduled", "import": "user_import"}[mode]
    whole_period: list[date] = []
    runs: list[dg.FeedRun] = []
    # Imports are a person waiting: wait out WB's per-minute statistics limit between pages.
    max_wait = INTERACTIVE_MAX_WAIT_SECONDS if mode == "import" else None
    with wb.client(cabinet_id, max_wait_seconds=max_wait) as client:
        try:
            for feed in (dg.ORDERS, dg.SALES):
                if mode == "increment":
                    start: datetime | date = dg.increment_start(warehouse.connect, feed, cabinet_id)
                    cursor_feed: str | None = feed.name
                else:
                    first = _window_first_day(config, today)
                    start, cursor_feed = dg.window_start(first), None
                    if mode == "import":
                        whole_period = [first + timedelta(days=i) for i in range((today - first).days + 1)]
                run = dg.load_feed(
                    warehouse.connect,
                    client,
                    feed,
                    cabinet_id,
                    start,
                    flag=0,
                    run_id=context.run_id,
                    trigger=trigger,
                    cursor_feed=cursor_feed,
                    should_yield=None if mode == "import" else _user_run_waiting(context.instance, cabinet_id),
                )
                runs.append(run)
                context.log.info(f"{feed.name} of {cabinet_id} from {start}: {run.summary()}")
        except Exception as exc:
            # Pages committed before the failure stay (the next run resumes after them): report the
            # days they changed, with the feeds loaded before, so that the РНП is recomputed there.
            changed = [*runs, *stored_runs(exc)]
            _record_changes(
                context, cabinet_id, changed, trigger=trigger, whole_period=[], request_id=config.request_id
            )
            raise
    _record_changes(context, cabinet_id, runs, trigger=trigger, whole_period=whole_period, request_id=config.request_id)
    result = {run.feed.name: run.summary() for run in runs}
    deferred = [r for r in runs if r.deferred_until is not None]
    if mode == "import":
        if deferred:
            # A user import is not done while part of it waits for WB beyond the interactive
            # wait: the run fails with the reason (the request follows it); what was merged stays,
            # and a new request re-reads it cheaply (merges are idempotent).
            raise Failure(
                description=f"WB paused the import of cabinet {cabinet_id} until "
                f"{deferred[0].deferred_until}: {deferred[0].deferred_reason}",
                allow_retries=False,
            )
        if config.request_id is not None:
            with warehouse.connect() as conn:
                outbox.mark_succeeded(conn, config.request_id, context.run_id, result)
                conn.commit()
    return result


def _user_run_waiting(instance: DagsterInstance, cabinet_id: str) -> Callable[[], bool]:
    """Whether a user's run (higher priority) waits in the queue for this cabinet: a scheduled
    load yields the cabinet at its next page boundary (the original's rule)."""

    def waiting() -> bool:
        runs = instance.get_runs(
            RunsFilter(statuses=[DagsterRunStatus.QUEUED], tags={TAG_CABINET: cabinet_id}), limit=20
        )
        return any(int(r.tags.get(TAG_PRIORITY, "0")) > PRIORITY_SCHEDULED for r in runs)

    return waiting


def _window_first_day(config: FeedSyncConfig, today: date) -> date:
    if config.date_from:
        try:
            return date.fromisoformat(config.date_from)
        except ValueError:
            raise InvalidInput(f"date_from {config.date_from!r} is not a date (YYYY-MM-DD)") from None
    return today - timedelta(days=(config.window_days or dg.WB_HORIZON_DAYS) - 1)


def _sync_op(mode: str, name: str, retry: RetryPolicy, description: str):
    @op(name=name, retry_policy=retry, description=description)
    def _op(context: OpExecutionContext, config: FeedSyncConfig, warehouse: Warehouse, wb: WbApi) -> None:
        try:
            result = _sync(context, config, warehouse, wb, mode)
        except Exception as exc:
            fail_on_permanent(exc, f"{name} of cabinet {config.cabinet_id}")
            raise
        context.log.info(f"{name} done: {result}")

    return _op


increment_op = _sync_op(
    "increment",
    op_name("digitization_increment"),
    SCHEDULED_RETRY,
    "Orders and sales changed since the stored cursor (flag=0).",
)
backfill_op = _sync_op(
    "backfill",
    op_name("digitization_backfill"),
    SCHEDULED_RETRY,
    "WB's change feed over the last window_days (default 90) days.",
)
import_op = _sync_op(
    "import", op_name("digitization_import"), DEFAULT_RETRY, "A user's feed import: everything from date_from to today."
)


@job(name="digitization_increment", tags={**queue_tags(QUEUE), TAG_TRIGGER: "schedule"})
def digitization_increment_job() -> None:
    increment_op()


@job(name="digitization_backfill", tags={**queue_tags(QUEUE), TAG_TRIGGER: "schedule"})
def digitization_backfill_job() -> None:
    backfill_op()


@job(
    name="digitization_import",
    tags={**queue_tags(QUEUE, priority=PRIORITY_USER), TAG_TRIGGER: "user"},
)
def digitization_import_job() -> None:
    import_op()
