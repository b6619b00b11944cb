"""РНП ("рука на пульсе", hand on the pulse): the Dagster shell of the mart ``rnp_daily`` and its
three rollups. What the tables hold and how they are recomputed is optima_pipelines/mart/ (free of
Dagster: ``mart.recompute``, ``mart.checks``, ``mart.plan``); this module declares the four assets
(one ``multi_asset``, op ``rnp``), their checks and jobs, runs the recompute in a run, and records
what it did (materializations, /metrics, check evaluations). These assets are the only writers of
the four tables.

Runs come from three places: the re-aggregation sensor (sensors/rnp.py) when a feed partition
changes, the nightly rnp-merge-sync (orchestration/cadences.py), and people (the UI, backfills, the CLI). A run
may cover a rectangle of cabinets × consecutive days (a partition range): the SQL takes all its
(cabinet, day) pairs at once, in bounded transactions. A user's import recomputes its own days in
its run (``recompute_in_run``).
"""

# No `from __future__ import annotations`: Dagster checks the context annotations at definition time.
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal

import psycopg
from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetSelection,
    AssetSpec,
    BackfillPolicy,
    Backoff,
    MaterializeResult,
    OpExecutionContext,
    RetryPolicy,
    define_asset_job,
    in_process_executor,
    multi_asset,
    multi_asset_check,
)

from optima_pipelines.changes import FeedChange
from optima_pipelines.errors import OptimaError
from optima_pipelines.landing.store import process_landing
from optima_pipelines.landing.totals import WbSaid, last_said
from optima_pipelines.mart.checks import (
    CHECK_METRICS,
    CHECK_SOURCES,
    CheckOutcome,
    compare_covered_with_feeds,
    evaluate_checks,
)
from optima_pipelines.mart.plan import FEED_ROLLUP, MART, due_pairs
from optima_pipelines.mart.recompute import TABLES, RecomputeStats, recompute_tables
from optima_pipelines.operations.freshness import catching_up
from optima_pipelines.operations.records import record_reaggregation
from optima_pipelines.orchestration.dagster_internals import log_materializations
from optima_pipelines.orchestration.queues import TAG_TRIGGER
from optima_pipelines.orchestration.retries import fail_on_permanent, is_transient
from optima_pipelines.partitions import CABINET_DAY, cabinet_day_key, parse_cabinet_day_key
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import today_moscow

#: The original re-aggregate queue: 3 attempts with backoff, for transient database trouble (a lost
#: connection, a serialization failure); a data, integrity or syntax error fails at once.
RECOMPUTE_RETRY = RetryPolicy(max_retries=2, delay=1, backoff=Backoff.EXPONENTIAL)


def _run_pairs(context: AssetExecutionContext | AssetCheckExecutionContext) -> list[tuple[str, date]]:
    return [parse_cabinet_day_key(str(key)) for key in context.partition_keys]


#: The run tag the re-aggregation sensor sets: since when the longest-waiting pair it planned is due
#: (the watermark's ``due_since``: the commit of the first feed write after its last recompute; ISO
#: 8601, UTC). The re-aggregation lag metrics measure from it.
TAG_SOURCE_EVENT_AT = "optima/source-event-at"
#: ``all`` on a run: recompute every pair of the run, even those whose watermark says their feeds
#: did not change (the nightly rnp-merge-sync sets it: it is the safety net; a person may set it).
TAG_RECOMPUTE = "optima/rnp-recompute"


def _source_event_at(tags: Mapping[str, str]) -> datetime | None:
    try:
        moment = datetime.fromisoformat(tags[TAG_SOURCE_EVENT_AT])
    except (KeyError, ValueError):
        return None
    return moment if moment.tzinfo is not None else None


def _record(
    context: AssetExecutionContext | OpExecutionContext,
    warehouse: Warehouse,
    table: str,
    pairs: Sequence[tuple[str, date]],
    started_at: datetime,
    *,
    stats: RecomputeStats | None = None,
    error: BaseException | None = None,
) -> None:
    """One re-aggregation record per cabinet of the run, for /metrics (optima_reaggregate_*)."""
    tags = context.run.tags
    outside = stats.days_outside_partitions if stats is not None else set()
    by_cabinet: dict[str, list[date]] = {}
    for cabinet, day in pairs:
        by_cabinet.setdefault(cabinet, []).append(day)
    finished_at = datetime.now(UTC)
    with warehouse.connect() as conn, conn.transaction():
        for cabinet, days in sorted(by_cabinet.items()):
            record_reaggregation(
                conn,
                domain=table.replace("_", "-"),
                cabinet_id=cabinet,
                run_id=context.run_id,
                trigger=tags.get(TAG_TRIGGER, "manual"),
                started_at=started_at,
                finished_at=finished_at,
                status="success" if error is None else "failure",
                partitions_requested=len(days),
                partitions_recomputed=0 if error is not None else sum(d not in outside for d in days),
                source_event_at=_source_event_at(tags),
                error=None if error is None else f"{error.__class__.__name__}: {error}",
            )


def _warn_dropped(context: AssetExecutionContext | OpExecutionContext, stats: RecomputeStats) -> None:
    if stats.rows_dropped:
        context.log.warning(
            f"{stats.table}: {stats.rows_dropped} rows of {len(stats.days_outside_partitions)} days without a table "
            f"partition were dropped (days {', '.join(sorted(d.isoformat() for d in stats.days_outside_partitions))}); "
            "the partition-manager keeps OPTIMA_PARTITION_RETENTION_MONTHS of history"
        )


def recompute_in_run(context: OpExecutionContext, warehouse: Warehouse, changes: Sequence[FeedChange]) -> None:
    """A user's import recomputes the РНП of what it changed in its own run, through the code of the
    four assets (``recompute_tables``, the same records and metadata), and records their
    materializations and the mart's checks as a run of ``rnp_recompute`` would: the seller sees the
    days in rnp_daily without waiting for the re-aggregation sensor's tick and a second run's start.
    It is the import's ``SyncJobSpec.after_sync``, called as its pages land.

    The pairs are the ones the sensor would plan: the due pairs of the cabinets whose feeds the
    import ``changes`` (``mart.plan.due_pairs``: whatever the import wrote, on whichever day). Their
    watermarks are then up to date, so the sensor requests nothing for them. Any failure here is
    logged and left to the sensor (the import's data is committed, the pairs stay due)."""
    cabinets = sorted({c.cabinet_id for c in changes if c.feed in FEED_ROLLUP})
    if not cabinets:
        return
    try:
        with warehouse.connect() as conn:
            due = due_pairs(conn, date.fromisoformat(load_settings().partitions_start), today_moscow(), cabinets)
    except (psycopg.Error, OptimaError) as exc:
        context.log.warning(
            f"could not read what is due for {', '.join(cabinets)}: {exc}: the sensor will recompute it"
        )
        return
    by_table = due.by_table()
    pairs = by_table[MART]
    if not pairs:
        return
    try:
        started_at = datetime.now(UTC)
        done = recompute_tables(warehouse.connect, by_table)
        for table, stats in done.items():
            if not by_table[table]:
                continue
            _record(context, warehouse, table, by_table[table], started_at, stats=stats)
            _warn_dropped(context, stats)
            outside = stats.days_outside_partitions
            metadata = stats.metadata()
            log_materializations(
                context,
                [
                    AssetMaterialization(asset_key=table, partition=cabinet_day_key(cabinet, day), metadata=metadata)
                    for cabinet, day in by_table[table]
                    if day not in outside
                ],
            )
        with warehouse.connect() as conn:
            checked, rows = compare_covered_with_feeds(conn, pairs)
            filling = catching_up(conn, [c for c, _ in checked], CHECK_SOURCES)
        for outcome in evaluate_checks(rows, sorted(CHECK_METRICS), filling):
            # Dagster records an op's check evaluations (its type hints name only materializations).
            context.log_event(check_evaluation(outcome))  # type: ignore[arg-type]
    except Exception as exc:  # the sensor recomputes what is left stale
        context.log.warning(
            f"the РНП of {len(pairs)} (cabinet, day)s was not recomputed in this run ({exc.__class__.__name__}: "
            f"{str(exc)[:300]}); the re-aggregation sensor recomputes it"
        )


#: The four tables, each its own asset (its key, its partitions' materializations and metadata, its
#: lineage), computed by one op so that a run writes each (cabinet, day) of all four in one
#: transaction and its transactions run at once (recompute_tables): Dagster's in-process executor
#: runs one asset's op after the other, and a process per op costs seconds of start-up.
RNP_SPECS = [
    AssetSpec(
        "rnp_sales",
        deps=["wb_orders", "wb_sales"],
        description="РНП sales per cabinet, Moscow day and product: orders (count, sum, cancellations) on the day "
        "the order was placed, buyouts and returns on the day of the sale or return, average order price and SPP. "
        "Definitions: mart/sql/rnp_sales.sql and docs/data.md.",
    ),
    AssetSpec(
        "rnp_ads",
        deps=["ad_campaign_stats"],
        description="РНП advertising per cabinet, Moscow day and product: views, clicks, spend, carts and orders "
        "from ads over every campaign and app, with CTR, CPC and CPM. Definitions: mart/sql/rnp_ads.sql.",
    ),
    AssetSpec(
        "rnp_finance",
        # wb_orders: a report line belongs to the day of its source order.
        deps=["wb_report_lines", "wb_orders"],
        description="РНП finance per cabinet, Moscow day of the source order and product: realization, payout, "
        "commission, acquiring, logistics, storage, acceptance, penalties and other deductions from WB's "
        "realization report. Definitions: mart/sql/rnp_finance.sql.",
    ),
    AssetSpec(
        MART,
        deps=["rnp_sales", "rnp_ads", "rnp_finance", "rnp_funnel_stats", "stocks"],
        description="The РНП mart: one row per cabinet × Moscow day × product with sales, ads (and ДРР), finance, "
        "the funnel (card opens, add-to-cart, conversions) and the end-of-day stock. What the product's РНП "
        'screens read. Definitions: mart/sql/rnp_daily.sql and docs/data.md ("rnp_daily: days and column definitions").',
    ),
]


@multi_asset(
    name="rnp",
    specs=[spec.replace_attributes(group_name="rnp", kinds={"postgres"}) for spec in RNP_SPECS],
    partitions_def=CABINET_DAY,
    backfill_policy=BackfillPolicy.single_run(),
    retry_policy=RECOMPUTE_RETRY,
    can_subset=True,
)
def rnp(context: AssetExecutionContext, warehouse: Warehouse) -> Iterator[MaterializeResult]:
    """The run's tables (its selected assets) for its (cabinet, day) partitions."""
    tables = [t for t in TABLES if AssetKey(t) in context.selected_asset_keys]
    pairs = _run_pairs(context)
    started_at = datetime.now(UTC)
    try:
        force = context.run.tags.get(TAG_RECOMPUTE) == "all"
        done = recompute_tables(warehouse.connect, dict.fromkeys(tables, pairs), force=force)
    except Exception as exc:
        # A data, integrity or syntax error fails at once (retries.is_transient's rule); a transient one
        # is retried by RECOMPUTE_RETRY. Either way the last attempt is a failure to count.
        permanent = isinstance(exc, psycopg.Error | OptimaError) and not is_transient(exc)
        if permanent or context.retry_number >= (RECOMPUTE_RETRY.max_retries or 0):
            for table in tables:
                _record(context, warehouse, table, pairs, started_at, error=exc)
        fail_on_permanent(exc, f"{', '.join(tables)} of {len(pairs)} partitions")
        raise
    for table in tables:
        _record(context, warehouse, table, pairs, started_at, stats=done[table])
        _warn_dropped(context, done[table])
        yield MaterializeResult(asset_key=table, metadata=done[table].metadata())


# --- asset checks ----------------------------------------------------------------------------------


def check_evaluation(outcome: CheckOutcome) -> AssetCheckEvaluation:
    """The Dagster evaluation of one (check, cabinet, day) outcome of rnp_daily's checks: a mismatch
    is an error, or a warning when the pair is stale (a feed committed after the recompute, between
    the mart's write and its check; the re-aggregation sensor mends it)."""
    return AssetCheckEvaluation(
        asset_key=AssetKey(MART),
        check_name=outcome.check_name,
        passed=outcome.passed,
        severity=AssetCheckSeverity.WARN if outcome.stale else AssetCheckSeverity.ERROR,
        description=outcome.description,
        metadata=outcome.metadata,
        partition=cabinet_day_key(outcome.cabinet_id, outcome.day),
    )


@multi_asset_check(
    name="rnp_daily_checks",
    specs=[
        AssetCheckSpec(
            "orders_match_wb_orders",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Orders count and sum of the day equal wb_orders for that cabinet and day.",
        ),
        AssetCheckSpec(
            "ad_spend_matches_ad_campaign_stats",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Ad spend of the day equals the sum of ad_campaign_stats for that cabinet and day.",
        ),
        AssetCheckSpec(
            "payout_matches_finance_lines",
            asset=MART,
            partitions_def=CABINET_DAY,
            description="Payout of the day equals the signed for_pay of the report lines attributed to it "
            "(source order's day, else the line's own day).",
        ),
    ],
    can_subset=True,
)
def rnp_daily_checks(context: AssetCheckExecutionContext, warehouse: Warehouse) -> Iterator[AssetCheckEvaluation]:
    """One result per check and rnp_daily partition of the run (a ranged run checks each of its days)."""
    pairs = _run_pairs(context)
    with warehouse.connect() as conn:
        checked, rows = compare_covered_with_feeds(conn, pairs)
        filling = catching_up(conn, [c for c, _ in checked], CHECK_SOURCES)
    if len(checked) < len(pairs):
        # Their rows were dropped by design; comparing them with the feeds would only ever fail.
        context.log.info(f"{len(pairs) - len(checked)} partitions have no rnp_daily table partition: not checked")
    names = sorted(k.name for k in context.selected_asset_check_keys)
    outcomes = evaluate_checks(rows, names, filling)
    landing = process_landing()
    if landing is not None and len(checked) <= WB_SAID_MAX_PAIRS:
        with warehouse.connect() as conn:
            outcomes = against_wb_last_said(outcomes, last_said(landing, conn, checked))
    elif landing is not None:
        context.log.info(
            f"{len(checked)} partitions: compared with the feeds only, not with the landing (at most {WB_SAID_MAX_PAIRS})"
        )
    for outcome in outcomes:
        yield check_evaluation(outcome)


#: A check run over at most this many partitions (a cabinet's two months, from the UI) also compares
#: the mart with what WB last said; the re-aggregation's ranged runs over many cabinets do not (the
#: landing is read per cabinet and holds weeks of every answer).
WB_SAID_MAX_PAIRS = 62
#: The checks that also compare the mart with what WB last said (the landing, landing/totals.py).
_WB_SAID = {"ad_spend_matches_ad_campaign_stats": "ad_spend", "payout_matches_finance_lines": "payout"}


def against_wb_last_said(
    outcomes: Sequence[CheckOutcome], said: Mapping[tuple[str, date], WbSaid]
) -> list[CheckOutcome]:
    """The ad-spend and payout outcomes compared with WB's last word too, where the landing holds one:
    a mart equal to its feeds but not to what WB last said fails, naming both."""
    out = []
    for outcome in outcomes:
        metric = _WB_SAID.get(outcome.check_name)
        wb = getattr(said.get((outcome.cabinet_id, outcome.day)), metric, None) if metric else None
        if metric is None or wb is None:
            out.append(outcome)
            continue
        mart = Decimal(outcome.metadata[f"{metric}_rnp_daily"])
        metadata = {**outcome.metadata, f"{metric}_wb_last_said": str(wb)}
        if mart == wb:
            out.append(replace(outcome, metadata=metadata, description=f"{outcome.description}; WB last said {wb}"))
        else:
            description = (
                f"{metric}: rnp_daily has {mart}, WB last said {wb} (the landing; cabinet {outcome.cabinet_id}, "
                f"day {outcome.day.isoformat()})" + ("" if outcome.passed else f"; {outcome.description}")
            )
            out.append(replace(outcome, passed=False, metadata=metadata, description=description))
    return out


#: The job the re-aggregation sensor and the nightly merge launch, with a subset of its assets.
rnp_recompute_job = define_asset_job(
    name="rnp_recompute",
    selection=AssetSelection.assets(*TABLES),
    partitions_def=CABINET_DAY,
    # One op (rnp): a process for it would only add seconds of start-up to every run.
    executor_def=in_process_executor,
    description="Recomputes РНП rollups and the rnp_daily merge for a rectangle of cabinets × days.",
)

#: The checks alone, for any partition or range: audits rnp_daily against the feeds without
#: recomputing it (the UI's launchpad or a backfill over months).
rnp_daily_check_job = define_asset_job(
    name="rnp_daily_check",
    selection=AssetSelection.checks_for_assets(MART),
    partitions_def=CABINET_DAY,
    executor_def=in_process_executor,
    description="Runs the rnp_daily asset checks (orders, ad spend, payout against the feeds) for a rectangle "
    "of cabinets × days.",
)
