"""The one sync pipeline: what every WB sync takes (``SyncInput``), what it returns (``FeedLoad``s),
and the bookkeeping they share.

Every sync of one cabinet has one entry point, a ``Sync``: ``(SyncInput) -> list[FeedLoad]``
(digitization, the finance report and uploads, ads, the funnel, the catalog, stocks). A ``FeedLoad``
is what one feed did: rows fetched and merged per business day, rows removed and deferral, told
per day as ``changes.FeedChange`` records (``FeedLoad.changes``), which runs record as materializations
(what the UI shows of a load; the РНП's planner reads the watermarks the feeds' triggers keep, not
these). Their run metadata, and
``finish`` records them for /metrics (``operations.records.record_feed_sync``) in the transaction that
also marks the sync state, so figures and state commit together. Loads run on a
``page_connection``: each page commits with its resume point in a transaction of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import psycopg
from psycopg import sql

from optima_pipelines.changes import FeedChange, iso_days
from optima_pipelines.db.connection import Connect
from optima_pipelines.db.sqlfiles import SqlFiles
from optima_pipelines.errors import OptimaError
from optima_pipelines.landing.store import sync_context
from optima_pipelines.load import MergeResult
from optima_pipelines.logs import get_logger
from optima_pipelines.operations.records import record_feed_sync
from optima_pipelines.sync.state import mark_deferred, mark_success
from optima_pipelines.wb import WbClient, WbDeferred
from optima_pipelines.wb.screening import Screening

#: Triggers as materialization metadata and /metrics know them (docs/ARCHITECTURE.md).
TRIGGERS = ("scheduled", "user_import", "backfill", "manual")

#: The text of ``sync/sql/<name>.sql``.
sql_file = SqlFiles(__file__)
log = get_logger(__name__)


@contextmanager
def page_connection(connect: Connect) -> Iterator[psycopg.Connection]:
    """The connection of a page-by-page load, in autocommit mode: each ``with conn.transaction()``
    on it is a top-level transaction that commits when its block ends, whatever ran before it.

    On a connection that is not in autocommit, any statement outside a block (reading the sync
    state, say) opens an implicit transaction, every later block becomes a savepoint inside it, and
    an exception on page N rolls back pages 1..N-1 and their cursor with it. Every write on this
    connection must be inside a ``conn.transaction()`` block (merge_rows checks that it is)."""
    with connect() as conn:
        conn.autocommit = True
        yield conn


#: The attribute of an exception that carries what the pages committed before it changed.
_STORED = "optima_stored_runs"


def note_stored(exc: BaseException, *runs: Any) -> None:
    """A load failed after some of its pages committed: attach its FeedLoads to the
    exception, so that the job still reports the days those pages changed before it fails (the
    next run resumes after them and would never report them)."""
    setattr(exc, _STORED, [*stored_runs(exc), *runs])


def stored_runs(exc: BaseException) -> list[Any]:
    """The runs ``note_stored`` attached to ``exc`` (none: nothing was committed, or no load ran)."""
    return list(getattr(exc, _STORED, []))


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class FeedLoad:
    """What one feed's load (a table / asset) did for one cabinet in one sync: rows fetched and
    merged per day, deferral, the days its rows move in the РНП. Not a Dagster run: a run (a job's
    or a sweep's) may hold the loads of several feeds and cabinets."""

    queue: str
    feed: str
    cabinet_id: str
    run_id: str | None
    trigger: str
    started_at: datetime = field(default_factory=_now)
    rows_fetched: int = 0
    requests: int = 0
    merge: MergeResult = field(default_factory=MergeResult)
    fetched_by_day: Counter[date] = field(default_factory=Counter)
    deleted_by_day: Counter[date] = field(default_factory=Counter)
    rows_deleted: int = 0
    #: Days to report as changed even if no row of theirs changed (an import reports its whole period).
    report_days: set[date] = field(default_factory=set)
    #: Rows WB sent without their key: not stored (logged).
    rows_skipped: int = 0
    #: Rows WB sent with a bad value (refused: not stored) or from the future (flagged: stored), each
    #: counted once a run however often WB repeats it; recorded in wb_rejected_rows (``screen``).
    rows_refused: int = 0
    rows_flagged: int = 0
    screened: set[tuple[str, str]] = field(default_factory=set, repr=False)
    deferred_until: datetime | None = None
    deferred_reason: str | None = None

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {TRIGGERS}, got {self.trigger!r}")

    def fetched(self, days: Iterable[date | None]) -> None:
        """Count fetched rows (one per item of ``days``; None for rows without a business day)."""
        n = 0
        for day in days:
            n += 1
            if day is not None:
                self.fetched_by_day[day] += 1
        self.rows_fetched += n

    def deleted(self, days: Iterable[date | None]) -> None:
        for day in days:
            self.rows_deleted += 1
            if day is not None:
                self.deleted_by_day[day] += 1

    @property
    def changed_days(self) -> set[date]:
        return self.merge.changed_days | set(self.deleted_by_day)

    @property
    def changed(self) -> bool:
        return bool(self.merge.inserted or self.merge.updated or self.rows_deleted)

    def change(self, day: date, trigger: str, request_id: int | None = None) -> FeedChange:
        """What this load changed on ``day``: the change record of its `cabinet|day` partition."""
        return FeedChange(
            feed=self.feed,
            cabinet_id=self.cabinet_id,
            day=day,
            rows_fetched=self.fetched_by_day.get(day, 0),
            rows_inserted=self.merge.inserted_by_day.get(day, 0),
            rows_updated=self.merge.updated_by_day.get(day, 0),
            rows_deleted=self.deleted_by_day.get(day, 0),
            rows_left=self.merge.left_by_day.get(day, 0),
            trigger=trigger,
            request_id=request_id,
        )

    def changes(self, trigger: str, request_id: int | None = None) -> list[FeedChange]:
        """One change record per day this load changed or reports (an import: its whole period)."""
        return [self.change(day, trigger, request_id) for day in sorted(self.changed_days | self.report_days)]

    def total(self, trigger: str, request_id: int | None = None) -> FeedChange:
        """What this load changed over all its days: the record of a cabinet-partitioned feed's
        materialization (``day`` None), under the same keys as a day's."""
        return FeedChange(
            feed=self.feed,
            cabinet_id=self.cabinet_id,
            day=None,
            rows_fetched=self.rows_fetched,
            rows_inserted=self.merge.inserted,
            rows_updated=self.merge.updated,
            rows_deleted=self.rows_deleted,
            trigger=trigger,
            request_id=request_id,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "rows_fetched": self.rows_fetched,
            "rows_skipped": self.rows_skipped,
            "rows_refused": self.rows_refused,
            "rows_flagged": self.rows_flagged,
            "rows_inserted": self.merge.inserted,
            "rows_updated": self.merge.updated,
            "rows_deleted": self.rows_deleted,
            "wb_requests": self.requests,
            "changed_days": iso_days(self.changed_days),
            "deferred_until": self.deferred_until.isoformat() if self.deferred_until else None,
        }

    def screen(self, conn: psycopg.Connection, screening: Screening) -> None:
        """Record what a page's screening refused and flagged (``wb.screening``), in the page's
        transaction, and say so in the log: the rest of the page is stored as usual."""
        new = []
        for verdict in (*screening.refused, *screening.flagged):
            if (verdict.outcome, verdict.raw) not in self.screened:
                self.screened.add((verdict.outcome, verdict.raw))
                new.append(verdict)
        if not new:
            return
        conn.execute(
            sql_file("wb_rejected_rows_record"),
            {
                "cabinet_id": self.cabinet_id,
                "feed": self.feed,
                "run_id": self.run_id,
                "endpoints": [v.endpoint for v in new],
                "outcomes": [v.outcome for v in new],
                "keys": [v.key for v in new],
                "fields": [v.field for v in new],
                "reasons": [v.reason for v in new],
                "raws": [v.raw for v in new],
            },
        )
        refused = [v for v in new if v.outcome == "refused"]
        flagged = [v for v in new if v.outcome == "flagged"]
        self.rows_refused += len(refused)
        self.rows_flagged += len(flagged)
        for outcome, verdicts, meaning in (
            ("refused", refused, "not stored"),
            ("flagged", flagged, "stored, never a cursor"),
        ):
            if verdicts:
                shown = "; ".join(f"{v.key or 'a row'}: {v.reason}" for v in verdicts[:5])
                more = f" and {len(verdicts) - 5} more" if len(verdicts) > 5 else ""
                log.warning(
                    "%s of cabinet %s: %s %d row(s) WB sent (%s): %s%s; see wb_rejected_rows",
                    self.feed,
                    self.cabinet_id,
                    outcome,
                    len(verdicts),
                    meaning,
                    shown,
                    more,
                )

    def record(self, conn: psycopg.Connection, *, status: str = "success", error: str | None = None) -> None:
        """This sync's figures for /metrics, in the caller's transaction. A success confirms the
        cabinet's feed fresh unless WB deferred it half-way (``deferred_until``)."""
        record_feed_sync(
            conn,
            queue=self.queue,
            feed=self.feed,
            cabinet_id=self.cabinet_id,
            run_id=self.run_id,
            trigger=self.trigger,
            started_at=self.started_at,
            status=status,
            rows_fetched=self.rows_fetched,
            rows_inserted=self.merge.inserted,
            rows_updated=self.merge.updated,
            changed_days=self.changed_days,
            error=error,
            confirmed=status == "success" and self.deferred_until is None,
        )


def feed_changes(loads: Iterable[FeedLoad], trigger: str, request_id: int | None = None) -> list[FeedChange]:
    """The change records of these loads, day by day (``FeedLoad.changes``)."""
    return [change for load in loads for change in load.changes(trigger, request_id)]


def _never() -> bool:
    return False


def _ignore_progress(runs: list[FeedLoad]) -> None:
    return None


#: The ``cabinet_id`` of a run that serves no one cabinet (the news); its FeedLoads name the cabinet
#: whose token served.
ANY_CABINET = "*"


def _no_client() -> WbClient:
    raise RuntimeError("this run serves no one cabinet: its sync opens WB clients with client_for")


@dataclass
class SyncInput:
    """What every sync takes from its run, free of Dagster: the one argument of a sync's entry point
    (``Sync``), built by the job (jobs/wb_sync.py) or the asset that runs it.

    ``client()`` opens the cabinet's WB client on first use (the caller closes it when the run ends);
    a run that serves no one cabinet (the news) gets ``client_for`` instead.
    ``should_yield`` is asked between pages by the loads that can stop early for a waiting user run.
    ``notes`` collect extra facts for the run's result: the request's (e.g. lines an upload shared with
    the API), or a partition asset's materialization metadata (e.g. how digitization fetched the day).
    """

    connect: Connect
    #: The cabinet the run serves; ANY_CABINET for a sync that serves none (``client_for``).
    cabinet_id: str
    run_id: str | None
    trigger: str
    client: Callable[[], WbClient] = _no_client
    #: WB clients by cabinet, for the sync that serves no one cabinet: the news are WB's, read with
    #: any active cabinet's token (the next one when WB rejects it); the sync closes each.
    client_for: Callable[[str], WbClient] | None = None
    request_id: int | None = None
    #: Days back to cover, today included, for syncs that work on a window (None: their own).
    window_days: int | None = None
    #: First Moscow day to load (a user's feed import).
    date_from: date | None = None
    #: A partition's Moscow day: load exactly that day (a `cabinet|day` partition run).
    day: date | None = None
    #: The Dagster backfill a partition run belongs to (digitization fetches a backfill's days once).
    backfill_id: str | None = None
    #: Job-specific settings (the report import's file path and format).
    options: Mapping[str, Any] = field(default_factory=dict)
    should_yield: Callable[[], bool] = _never
    #: Called by a window's load after each page of its last feed, with every feed's run so far: a
    #: user's import publishes its РНП days there (jobs/wb_sync.py), for WB's flag=0 load ends only on
    #: an empty page, and sales allow one request a minute: the page that ends the load is a minute away.
    on_progress: Callable[[list[FeedLoad]], None] = _ignore_progress
    notes: dict[str, Any] = field(default_factory=dict)


#: A sync's one entry point: does the work for one cabinet and returns what each feed changed.
Sync = Callable[[SyncInput], list[FeedLoad]]


def sync_name(body: Sync) -> str:
    """How the landing names an entry point (``optima_pipelines.sync.ads.sync``): what a replay runs."""
    return f"{body.__module__}.{body.__qualname__}"


def replay_inputs(inp: SyncInput) -> dict[str, Any]:
    """What of a SyncInput a replay gives the entry point again (landed with each answer)."""
    return {
        "cabinet_id": inp.cabinet_id,
        "trigger": inp.trigger,
        "window_days": inp.window_days,
        "date_from": inp.date_from.isoformat() if inp.date_from else None,
        "day": inp.day.isoformat() if inp.day else None,
        "backfill_id": inp.backfill_id,
        "options": dict(inp.options),
    }


def run_sync(body: Sync, inp: SyncInput) -> list[FeedLoad]:
    """Call a sync's entry point: every job and asset does it this way, so that the WB answers it
    decodes land as one invocation of it (landing/store.py), which a replay can run again."""
    with sync_context(sync_name(body), inp.run_id, replay_inputs(inp)):
        return body(inp)


def finish(
    conn: psycopg.Connection,
    runs: Iterable[FeedLoad],
    *,
    state_feed: str | None,
    deferred: WbDeferred | None = None,
) -> None:
    """End a sync in one transaction: mark its state (success, or the deferral) and record its figures.

    With ``deferred``, every run is marked deferred until WB's ``resume_at`` (the resume sensor
    launches the job again then) and what was merged so far stays committed.
    """
    runs = list(runs)
    with conn.transaction():
        if state_feed is not None and runs:
            cabinet_id = runs[0].cabinet_id
            if deferred is not None:
                mark_deferred(conn, cabinet_id, state_feed, deferred.resume_at, str(deferred))
            else:
                mark_success(conn, cabinet_id, state_feed, runs[0].run_id)
        for run in runs:
            if deferred is not None:
                run.deferred_until, run.deferred_reason = deferred.resume_at, str(deferred)
            run.record(conn)


@contextmanager
def paged_load(
    conn: psycopg.Connection, run: FeedLoad, state_feed: str | None, on_deferral: Callable[[], None] | None = None
) -> Iterator[None]:
    """The pages of a load (each committed with its resume point inside the block): a WB pause
    ends the load there, with what was stored and the resume time (``on_deferral`` first saves
    what is left to do, in its own transaction; then ``finish`` marks the deferral and records
    the figures, and ``run.deferred_until`` says so); any other exception is raised with the
    stored pages attached (``note_stored``). After the block, a load whose ``deferred_until`` is
    None went to the end and is the caller's to ``finish``."""
    try:
        yield
    except WbDeferred as deferred:
        if on_deferral is not None:
            with conn.transaction():
                on_deferral()
        finish(conn, [run], state_feed=state_feed, deferred=deferred)
    except Exception as exc:
        note_stored(exc, run)
        raise


def record_failure(connect: Connect, runs: Iterable[FeedLoad], error: BaseException) -> None:
    """A failed sync's figures, in a fresh transaction after its rollback; never raises over the error."""
    try:
        with connect() as conn, conn.transaction():
            for run in runs:
                run.record(conn, status="failure", error=f"{error.__class__.__name__}: {error}")
    except (psycopg.Error, OptimaError):
        pass  # the figures are lost, not the reason: the run fails with the original error


def rows_in_day(connect: Connect, table: str, cabinet_id: str, day: date) -> int:
    """How many rows of a `cabinet|day` feed table the partition holds now."""
    with connect() as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE cabinet_id = %s AND day = %s").format(sql.Identifier(table)),
            (cabinet_id, day),
        ).fetchone()
    return int(row[0]) if row else 0


def due_resumes_by_feed(conn: psycopg.Connection, feeds: list[str], now: datetime) -> dict[tuple[str, str], datetime]:
    """(cabinet, feed) → resume_at, for the syncs of these feeds WB paused and may resume now."""
    rows = conn.execute(
        "SELECT cabinet_id, feed, resume_at FROM sync_state WHERE feed = ANY(%s) AND resume_at <= %s",
        (feeds, now),
    ).fetchall()
    return {(cabinet, feed): at for cabinet, feed, at in rows}


def paused_cabinets(conn: psycopg.Connection, feeds: list[str], now: datetime) -> set[str]:
    """Cabinets with one of these syncs paused by WB until later than ``now``: they resume on their own."""
    rows = conn.execute(
        "SELECT DISTINCT cabinet_id FROM sync_state WHERE feed = ANY(%s) AND resume_at > %s", (feeds, now)
    ).fetchall()
    return {r[0] for r in rows}
