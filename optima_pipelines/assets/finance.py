"""Finance: the realization report, by cabinet × Moscow day of the report line (the `rnp-finance-sync` queue),
and the reports users upload (`import-user-report` requests).

Every materialization of a ``wb_report_lines`` partition means "lines of this day changed" and
carries ``affected_days``: the Moscow days of the changed lines' source orders (``srid`` →
``wb_orders.day``, else the line's own day), which the РНП re-aggregation recomputes.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from datetime import date
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    asset,
    job,
    op,
)

from optima_pipelines.assets.wb_sync import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    CabinetSyncConfig,
    SyncJobSpec,
    cabinet_and_day,
    cabinet_sync_job,
    emit_days,
    fail_on_permanent,
    op_name,
    partition_trigger,
    run_cabinet_sync,
)
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.partitions import CABINET_DAY
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import catalog
from optima_pipelines.sync import finance as fin
from optima_pipelines.sync.report_file import parse_report_file
from optima_pipelines.sync.runs import SyncInput, SyncRun


def _rows_in_day(warehouse: Warehouse, cabinet_id: str, day: date) -> int:
    with warehouse.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM wb_report_lines WHERE cabinet_id = %s AND day = %s", (cabinet_id, day)
        ).fetchone()
    return int(row[0]) if row else 0


@asset(
    name=fin.FEED,
    partitions_def=CABINET_DAY,
    group_name="finance",
    kinds={"postgres"},
    retry_policy=DEFAULT_RETRY,
)
def wb_report_lines(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """WB's realization report (finance API `sales-reports/detailed`, daily reports): one row per report
    line with its money to the kopeck, in the partition of the line's own Moscow day (rrDate). Lines
    of reports users uploaded (`source = user_report`) sit beside them, each real line once.
    Materializing a partition reloads that day's lines from WB; `affected_days` are the days of the
    changed lines' source orders, which the РНП finance rollup recomputes."""
    cabinet_id, day = cabinet_and_day(context)
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            run = fin.load_report(
                warehouse.connect, client, cabinet_id, day, day, run_id=context.run_id, trigger=trigger
            )
    except Exception as exc:
        fail_on_permanent(exc, f"{fin.FEED} {cabinet_id}|{day}")
        raise
    if run.deferred_until is not None:
        raise Failure(
            description=f"WB paused the finance report of cabinet {cabinet_id} until "
            f"{run.deferred_until.isoformat()} ({run.deferred_reason}); materialize {cabinet_id}|{day} again after that",
            allow_retries=False,
        )
    emit_days(context, [run], trigger=trigger, skip=(fin.FEED, day))
    meta = run.day_metadata(day)
    return MaterializeResult(
        metadata={
            **{k: v for k, v in meta.items() if k != "affected_days"},
            "affected_days": MetadataValue.json(sorted(meta.get("affected_days", []))),
            "wb_requests": run.requests,
            "rows_in_day": _rows_in_day(warehouse, cabinet_id, day),
            "trigger": trigger,
        }
    )


def _nightly(call: SyncInput) -> list[SyncRun]:
    date_from, date_to = fin.report_window()
    return [
        fin.load_report(
            call.connect,
            call.client(),
            call.cabinet_id,
            date_from,
            date_to,
            run_id=call.run_id,
            trigger=call.trigger,
            state_feed=fin.STATE_FEED,
        )
    ]


finance_sync_job = cabinet_sync_job(
    SyncJobSpec(
        name="finance_sync",
        queue=fin.QUEUE,
        feeds=(fin.FEED,),
        body=_nightly,
        description="The realization report of the last 14 days for one cabinet, page by page along WB's "
        "rrdId (a deferred load resumes after its last stored page).",
        state_feed=fin.STATE_FEED,
    )
)


# -- import-user-report -------------------------------------------------------------------------


class ReportImportConfig(CabinetSyncConfig):
    #: The uploaded file, on a filesystem the run can read.
    path: str
    #: xlsx or csv; None: from the file name.
    format: str | None = None


def _import(call: SyncInput) -> list[SyncRun]:
    path = Path(call.options["path"])
    report = parse_report_file(path, call.options.get("format"))

    def refresh_catalog() -> None:
        # The report names products the warehouse does not know: ask WB for the cabinet's cards.
        catalog.sync_cards(call.connect, call.client(), call.cabinet_id, run_id=call.run_id, trigger=call.trigger)

    fin.check_owner(call.connect, report, call.cabinet_id, refresh_catalog)
    run, known = fin.import_report(
        call.connect, report, call.cabinet_id, request_id=call.request_id, run_id=call.run_id
    )
    call.notes.update(
        file=path.name,
        sheet=report.sheet,
        lines_in_file=len(report.rows),
        lines_known_from_wb_api=known,
        unknown_headers=report.unknown_headers,
    )
    return [run]


IMPORT_SPEC = SyncJobSpec(
    name="finance_report_import",
    queue=fin.IMPORT_QUEUE,
    feeds=(fin.FEED,),
    body=_import,
    description="A realization report a user downloaded from WB's seller portal (xlsx or csv): parsed and "
    "checked completely, then written in one transaction; or nothing is written and the request fails "
    "with the reason (and the row).",
    user_trigger="user_import",
)


@op(name=op_name(IMPORT_SPEC.name), retry_policy=IMPORT_SPEC.retry, description=IMPORT_SPEC.description)
def finance_report_import_op(
    context: OpExecutionContext, config: ReportImportConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    run_cabinet_sync(IMPORT_SPEC, context, config, warehouse, wb)


@job(name=IMPORT_SPEC.name, tags=IMPORT_SPEC.tags, description=IMPORT_SPEC.description)
def finance_report_import_job() -> None:
    finance_report_import_op()
