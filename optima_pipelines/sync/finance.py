"""The realization (finance) report (the original's `rnp-finance-sync` queue) and user report uploads.

Two sources fill ``wb_report_lines``:

- **WB's finance API** (``POST /api/finance/v1/sales-reports/detailed``, daily reports, money as
  strings → Decimal): the nightly sync loads the last 14 days page by page along WB's rrdId cursor,
  each page merged in its own transaction together with the cursor, so a deferral (WB allows one
  request a minute) resumes after the last stored page. A `cabinet|day` partition reloads the lines
  whose own day (rrDate) is that day.
- **A report the user downloaded** from the seller portal («Детализация отчёта реализации», xlsx or
  csv, Russian headers; parsed by ``sync/report_file.py``). It is parsed completely and checked
  before anything is written, then written in one transaction: a bad cell, a wrong sheet, missing
  columns or rows of another cabinet write nothing and fail with a reason naming the row.

A line known from both (same ``report_line_key``: source order, operation, product, sale day, counts
and money) is stored once: the API's version wins, see migration 0007.

Which days changed: a line belongs to the partition of its own day (``day``: rrDate for API lines;
the sale date for uploaded ones, whose export has no operation date). The РНП attributes money to
the Moscow day of the line's source order (``srid`` → ``wb_orders.day``, else the line's own day:
``attributed_day``, migration 0015), and the watermarks make that day's rnp_finance due.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import psycopg
from psycopg import sql

from optima_pipelines.db.connection import Connect
from optima_pipelines.errors import InvalidInput
from optima_pipelines.load import MergeResult, merge_rows
from optima_pipelines.orchestration.queues import DIGITIZATION_SYNC, RNP_FINANCE_SYNC
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.catalog import sync_cards
from optima_pipelines.sync.report_file import IMPORT_COLUMNS, ParsedReport, header, parse_report_file, upload_path
from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish, page_connection, paged_load, sql_file
from optima_pipelines.sync.state import get_state, save_cursor
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import ReportLine, WbClient

#: A line's attributed_day (migration 0015), computed by the loads' INSERT from the staged line ``s``
#: (the API merge's derived column, the upload's finance_upload_write.sql): its order's day, else its own.
PLACED = {
    "attributed_day": sql.SQL(
        "coalesce((SELECT o.day FROM wb_orders o WHERE o.cabinet_id = s.cabinet_id AND o.srid = s.srid), s.day)"
    )
}

QUEUE = RNP_FINANCE_SYNC
FEED = "wb_report_lines"
#: sync_state feed of the nightly sync: its cursor is {date_from, date_to, after_rrd_id, complete}.
STATE_FEED = "report"
#: The nightly sync reloads this many days before today (the original's 14).
WINDOW_DAYS = 14
#: User uploads are imported under the digitization queue, as in the original.
IMPORT_QUEUE = DIGITIZATION_SYNC

API_COLUMNS = ("cabinet_id", *ReportLine.COLUMNS)
KEY = ("cabinet_id", "rrd_id")


def report_window(today: date | None = None) -> tuple[date, date]:
    """The nightly sync's days: the 14 days before today (today's report does not exist yet)."""
    today = today or today_moscow()
    return today - timedelta(days=WINDOW_DAYS), today - timedelta(days=1)


def load_report(
    connect: Connect,
    client: WbClient,
    cabinet_id: str,
    date_from: date,
    date_to: date,
    *,
    run_id: str | None,
    trigger: str,
    state_feed: str | None = None,
    limit: int = 100_000,
) -> FeedLoad:
    """Load the report lines of ``[date_from, date_to]`` (by their own day), page by page (``limit``
    lines a page: WB's maximum by default).

    With ``state_feed`` the rrdId cursor is saved with every page, and a load of the same window
    that was deferred resumes after its last stored page. WB's pause (WbDeferred) ends the load
    with what was stored and the resume time in sync_state.
    """
    run = FeedLoad(QUEUE, FEED, cabinet_id, run_id, trigger)
    window = {"date_from": date_from.isoformat(), "date_to": date_to.isoformat()}
    after = 0
    with page_connection(connect) as conn:
        if state_feed is not None:
            cursor = get_state(conn, cabinet_id, state_feed).cursor or {}
            if not cursor.get("complete", True) and all(cursor.get(k) == v for k, v in window.items()):
                after = int(cursor.get("after_rrd_id", 0))
        with paged_load(conn, run, state_feed):
            for page in client.iter_report_lines(date_from, date_to, period="daily", limit=limit, after_rrd_id=after):
                run.requests += 1
                run.fetched(line.day for line in page)
                with conn.transaction():  # the page and the cursor after it commit together
                    _store_api_page(conn, run, page)
                    run.screen(conn, page.screening)
                    if state_feed is not None and page:
                        cursor = {**window, "after_rrd_id": page[-1].rrd_id, "complete": False}
                        save_cursor(conn, cabinet_id, state_feed, cursor, run_id)
            run.requests += 1  # the 204 that ended the report
        if run.deferred_until is not None:
            return run
        with conn.transaction():
            if state_feed is not None:
                save_cursor(conn, cabinet_id, state_feed, {**window, "after_rrd_id": 0, "complete": True}, run_id)
            finish(conn, [run], state_feed=state_feed)
    return run


def _with_api_counts(name: str) -> sql.Composed:
    """The statement ``sync/sql/<name>.sql`` with its CTE ``{api}``: how many API lines have each
    fingerprint (``finance_api_line_counts.sql``, the one rule that tells an uploaded line the API
    delivered too)."""
    return sql.SQL(sql_file(name)).format(api=sql.SQL(sql_file("finance_api_line_counts")))


def _store_api_page(conn: psycopg.Connection, run: FeedLoad, page: list[ReportLine]) -> None:
    """Merge one page of API lines; drop the uploaded twins they replace."""
    if not page:
        return
    rows = [(run.cabinet_id, *line.copy_row()) for line in page]
    rrd_ids = [line.rrd_id for line in page]
    with conn.transaction():
        run.merge += merge_rows(conn, FEED, API_COLUMNS, KEY, rows, run_id=run.run_id, derived=PLACED)
        uploads = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM wb_report_lines WHERE cabinet_id = %s AND source = 'user_report')",
            (run.cabinet_id,),
        ).fetchone()
        if uploads and uploads[0]:
            dropped = conn.execute(
                _with_api_counts("finance_drop_uploaded_twins"), {"cabinet_id": run.cabinet_id, "rrd_ids": rrd_ids}
            ).fetchall()
            run.deleted(line_day for line_day, _ in dropped)


# -- Checking whose report it is, and writing it -------------------------------------------------


def known_products(conn: psycopg.Connection, cabinet_id: str) -> set[int]:
    """Every product id the warehouse knows for the cabinet (cards, orders, sales, report, campaigns)."""
    rows = conn.execute(sql_file("finance_known_products"), {"cabinet_id": cabinet_id}).fetchall()
    return {int(nm) for (nm,) in rows}


def foreign_products(report: ParsedReport, known: set[int]) -> list[tuple[int, int]]:
    """(sheet row, product id) of the report's products that are not the cabinet's, in row order."""
    return sorted((row, nm) for nm, row in report.nm_ids.items() if nm not in known)


def check_owner(
    connect: Connect, report: ParsedReport, cabinet_id: str, refresh_catalog: Callable[[], None] | None
) -> None:
    """Raise InvalidInput when the report names a product that is not one of the cabinet's.

    WB's product ids (nmID) belong to one seller each, so a report whose products the cabinet does
    not have is another cabinet's. Products unknown to the warehouse are looked up once more after
    ``refresh_catalog`` (a cards sync from WB), so a product added since the last sync passes.
    """
    with connect() as conn:
        foreign = foreign_products(report, known_products(conn, cabinet_id))
    if foreign and refresh_catalog is not None:
        refresh_catalog()
        with connect() as conn:
            foreign = foreign_products(report, known_products(conn, cabinet_id))
    if foreign:
        row, nm = foreign[0]
        more = f" (and {len(foreign) - 1} more products)" if len(foreign) > 1 else ""
        raise InvalidInput(
            f"row {row}: product {nm} («{header('nm_id')}») is not a product of cabinet {cabinet_id!r}{more}: "
            "the report belongs to another cabinet"
        )


def import_report(
    connect: Connect,
    report: ParsedReport,
    cabinet_id: str,
    *,
    request_id: int | None,
    run_id: str | None,
) -> tuple[FeedLoad, int]:
    """Write a parsed upload in one transaction; returns its FeedLoad and how many of its lines the
    API had already delivered (left out). Uploading the same report again changes nothing."""
    run = FeedLoad(IMPORT_QUEUE, FEED, cabinet_id, run_id, "user_import")
    run.fetched(row[1] for row in report.rows)
    ident = sql.Identifier
    data_columns = [c for c in IMPORT_COLUMNS if c != "cabinet_id"]
    with connect() as conn, conn.transaction():
        conn.execute(
            "CREATE TEMP TABLE _report_upload (LIKE wb_report_lines INCLUDING DEFAULTS, "
            "file_row integer NOT NULL, line_key text, known boolean NOT NULL DEFAULT false) ON COMMIT DROP"
        )
        conn.execute("ALTER TABLE _report_upload ALTER COLUMN rrd_id DROP NOT NULL")
        copy_sql = sql.SQL("COPY _report_upload ({}, file_row) FROM STDIN").format(
            sql.SQL(", ").join(map(ident, IMPORT_COLUMNS))
        )
        with conn.cursor().copy(copy_sql) as copy:
            for row, number in zip(report.rows, report.row_numbers, strict=True):
                copy.write_row((cabinet_id, *row[1:], number))
        conn.execute("ANALYZE _report_upload")  # a fresh temp table has no statistics to plan with
        conn.execute(sql_file("finance_upload_number"))
        known = len(conn.execute(_with_api_counts("finance_upload_known"), {"cabinet_id": cabinet_id}).fetchall())
        statement = sql.SQL(sql_file("finance_upload_write")).format(
            columns=sql.SQL(", ").join(map(ident, IMPORT_COLUMNS)),
            set_clause=sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(ident(c)) for c in data_columns),
            old=sql.SQL(", ").join(sql.SQL("t.{}").format(ident(c)) for c in data_columns),
            new=sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(ident(c)) for c in data_columns),
            attributed_day=PLACED["attributed_day"],
        )
        written = conn.execute(statement, {"request_id": request_id, "run_id": run_id}).fetchall()
        merge = MergeResult(rows_staged=len(report.rows))
        for inserted, _, day in written:
            if inserted:
                merge.inserted += 1
                merge.inserted_by_day[day] += 1
            else:
                merge.updated += 1
                merge.updated_by_day[day] += 1
        run.merge = merge
        run.record(conn)
        conn.execute("DROP TABLE _report_upload")
    return run, known


def sync_day(inp: SyncInput) -> list[FeedLoad]:
    """The `wb_report_lines` partition ``inp.day``: the lines whose own day it is."""
    assert inp.day is not None
    day = inp.day
    return [load_report(inp.connect, inp.client(), inp.cabinet_id, day, day, run_id=inp.run_id, trigger=inp.trigger)]


def import_upload(inp: SyncInput) -> list[FeedLoad]:
    """A user's uploaded report (``options``: path, format): parsed, checked to be the cabinet's, written."""
    path = upload_path(load_settings().upload_dir, str(inp.options["path"]))
    report = parse_report_file(path, inp.options.get("format"))

    def refresh_catalog() -> None:
        # The report names products the warehouse does not know: ask WB for the cabinet's cards.
        sync_cards(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger)

    check_owner(inp.connect, report, inp.cabinet_id, refresh_catalog)
    run, known = import_report(inp.connect, report, inp.cabinet_id, request_id=inp.request_id, run_id=inp.run_id)
    inp.notes.update(
        file=path.name,
        sheet=report.sheet,
        lines_in_file=len(report.rows),
        lines_known_from_wb_api=known,
        unknown_headers=report.unknown_headers,
    )
    return [run]


def sync_nightly(inp: SyncInput) -> list[FeedLoad]:
    """The nightly sync: the report of the last WINDOW_DAYS days, resuming a deferred load."""
    date_from, date_to = report_window()
    return [
        load_report(
            inp.connect,
            inp.client(),
            inp.cabinet_id,
            date_from,
            date_to,
            run_id=inp.run_id,
            trigger=inp.trigger,
            state_feed=STATE_FEED,
        )
    ]
