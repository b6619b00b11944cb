"""Finance: the realization report, by cabinet × Moscow day of the report line (the `rnp-finance-sync` queue),
and the reports users upload (`import-user-report` requests).

Every materialization of a ``wb_report_lines`` partition means "lines of this day changed". The РНП
places a line on the Moscow day of its source order (``srid`` → ``wb_orders.day``, else the line's
own day: ``attributed_day``), and the watermarks make rnp_finance of that day due.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.

from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import CabinetSyncConfig, SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import finance as fin
from optima_pipelines.sync.runs import rows_in_day

wb_report_lines = sync_partition_asset(
    fin.FEED,
    "finance",
    {
        fin.FEED: "WB's realization report (finance API `sales-reports/detailed`, daily reports): one row "
        "per report line with its money to the kopeck, in the partition of the line's own Moscow day "
        "(rrDate). Lines of reports users uploaded (`source = user_report`) sit beside them, each real line "
        "once. Materializing a partition reloads that day's lines from WB; the РНП finance rollup places a line "
        "on its source order's day (`attributed_day`) and recomputes the days whose lines changed.",
    },
    fin.sync_day,
    extra=lambda warehouse, cabinet_id, day: {"rows_in_day": rows_in_day(warehouse.connect, fin.FEED, cabinet_id, day)},
)


FINANCE_SYNC_SPEC = SyncJobSpec(
    name="finance_sync",
    queue=fin.QUEUE,
    feeds=(fin.FEED,),
    body=fin.sync_nightly,
    description="The realization report of the last 14 days for one cabinet, page by page along WB's "
    "rrdId (a deferred load resumes after its last stored page).",
    state_feed=fin.STATE_FEED,
)
finance_sync_job = cabinet_sync_job(FINANCE_SYNC_SPEC)
finance_sync_sweep = sweep_job(FINANCE_SYNC_SPEC)


# -- import-user-report -------------------------------------------------------------------------


class ReportImportConfig(CabinetSyncConfig):
    #: The uploaded file, on a filesystem the run can read.
    path: str
    #: xlsx or csv; None: from the file name.
    format: str | None = None


IMPORT_SPEC = SyncJobSpec(
    name="finance_report_import",
    queue=fin.IMPORT_QUEUE,
    feeds=(fin.FEED,),
    body=fin.import_upload,
    description="A realization report a user downloaded from WB's seller portal (xlsx or csv): parsed and "
    "checked completely, then written in one transaction; or nothing is written and the request fails "
    "with the reason (and the row).",
    user_trigger="user_import",
)


finance_report_import_job = cabinet_sync_job(IMPORT_SPEC, ReportImportConfig)
