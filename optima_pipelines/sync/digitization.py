"""Digitization feeds (the original's `digitization-sync` queue): WB orders and sales/returns.

Three ways to load, one mechanism (fetch pages from WB, merge each page in its own transaction):

- a **day** (a `cabinet|day` partition materialized from the UI, a backfill or the CLI): `flag=1`
  returns exactly that Moscow day; inside a backfill, one `flag=0` fetch from the day serves every
  later day of the backfill (see `plan_partition_fetch`);
- the **increment** (every 30 min): `flag=0` from the stored cursor minus an overlap; the cursor
  (the last `lastChangeDate` seen) is saved in the same transaction as each page;
- a **window** (the nightly backfill, a user import): `flag=0` from the window's first day; one
  request per WB page (≈80k rows), never one per day.

WB's `flag=0` returns every row whose `lastChangeDate` is on or after `dateFrom`, so cancellations
and returns of old orders come back and their (old) days are reported as changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from optima_pipelines.db.connection import Connect
from optima_pipelines.errors import InvalidInput
from optima_pipelines.load import merge_rows
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import DIGITIZATION_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput, note_stored, page_connection
from optima_pipelines.sync.state import get_state, mark_deferred, mark_success, save_cursor
from optima_pipelines.timeutil import MOSCOW, now_moscow
from optima_pipelines.wb import Order, Page, Sale, WbClient, WbDeferred
from optima_pipelines.wb.screening import FUTURE_ALLOWANCE

#: Re-read this much before the stored cursor: WB publishes its feed in batches (every ~30 min) and
#: rows can appear with a lastChangeDate slightly before the newest one already seen.
INCREMENT_OVERLAP = timedelta(hours=1)
QUEUE = DIGITIZATION_SYNC
log = get_logger(__name__)
#: WB keeps statistics rows for 90 days from the order.
WB_HORIZON_DAYS = 90


def check_date_from(value: object, today: date) -> date:
    """An import's first day (``YYYY-MM-DD``): a real date, not in the future, within WB's 90-day
    horizon; InvalidInput naming what is wrong otherwise. The CLI and the requests sensor both use it."""
    if not isinstance(value, str):
        raise InvalidInput('malformed payload: expected a JSON object with "dateFrom": "YYYY-MM-DD"')
    try:
        date_from = date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"dateFrom {value!r} is not a date (YYYY-MM-DD)") from None
    if date_from > today:
        raise InvalidInput(f"dateFrom {date_from} is in the future (today in Moscow is {today})")
    earliest = today - timedelta(days=WB_HORIZON_DAYS)
    if date_from < earliest:
        raise InvalidInput(f"dateFrom {date_from} is before WB's 90-day horizon (earliest {earliest})")
    return date_from


@dataclass(frozen=True)
class Feed:
    """One WB statistics feed and the table it lands in."""

    name: str  # "orders" | "sales": also the sync_state feed name
    asset: str  # the Dagster asset key
    table: str
    key: tuple[str, ...]
    model: type
    #: (client, dateFrom, flag, the keys already read at dateFrom) → pages.
    fetch: Callable[[WbClient, datetime | date, int, frozenset[str]], Iterator[Page[Any]]]

    @property
    def key_attr(self) -> str:
        """The row model's attribute WB's rows are told apart by (srid, sale_id)."""
        return self.key[1]

    @property
    def columns(self) -> tuple[str, ...]:
        """The table columns a load writes: the cabinet, then the row model's own (day included)."""
        return ("cabinet_id", *self.model.COLUMNS)  # type: ignore[attr-defined]

    def has_key(self, row: Any) -> bool:
        """False for a row WB sent with an empty key (its spec allows an empty saleID): nothing to store it by."""
        return all(getattr(row, k) for k in self.key[1:])

    def keyless(self, page: Sequence[Any]) -> list[Any]:
        return [r for r in page if not self.has_key(r)]

    def to_rows(self, page: Sequence[Any], cabinet_id: str, only_day: date | None = None) -> list[tuple[Any, ...]]:
        """The page's rows that have their key, of ``only_day`` if given."""
        return [
            (cabinet_id, *r.copy_row()) for r in page if self.has_key(r) and (only_day is None or r.day == only_day)
        ]


ORDERS = Feed(
    "orders",
    "wb_orders",
    "wb_orders",
    ("cabinet_id", "srid"),
    Order,
    lambda c, d, f, seen: c.iter_orders(d, flag=f, seen=seen),
)
SALES = Feed(
    "sales",
    "wb_sales",
    "wb_sales",
    ("cabinet_id", "sale_id"),
    Sale,
    lambda c, d, f, seen: c.iter_sales(d, flag=f, seen=seen),
)
FEEDS = {f.asset: f for f in (ORDERS, SALES)}


def load_feed(
    inp: SyncInput,
    feed: Feed,
    date_from: datetime | date,
    *,
    flag: int,
    cursor_feed: str | None = None,
    only_day: date | None = None,
    seen: frozenset[str] = frozenset(),
    after_page: Callable[[FeedLoad], None] | None = None,
) -> FeedLoad:
    """Fetch every page of ``feed`` for the cabinet of ``inp`` and merge it, one transaction per page
    (with the cursor, if ``cursor_feed``: the newest lastChangeDate and the keys of the rows at it,
    so that a load going on from there knows WB's repeat of them is nothing new; ``seen`` are those
    keys when ``date_from`` is one).

    A WB rate-limit pause longer than the client's limit raises WbDeferred before a request is
    sent: the pages merged so far stay committed, the resume time is recorded in sync_state, and
    the returned FeedLoad says until when the load was deferred. ``inp.should_yield`` is asked between
    pages: a scheduled load stops there (and resumes later) when a user's run waits for the cabinet.
    ``after_page`` is called with the run after each page with rows is committed.
    The load's figures are recorded for /metrics (ops_feed_syncs) when it ends, however it ends.
    """
    cabinet_id, run_id, client = inp.cabinet_id, inp.run_id, inp.client()
    run = FeedLoad(QUEUE, feed.asset, cabinet_id, run_id, inp.trigger)
    state_feed = cursor_feed or feed.name
    cursor: datetime | None = None
    at_cursor: set[str] = set()
    with page_connection(inp.connect) as conn:
        try:
            for page in feed.fetch(client, date_from, flag, seen):
                run.requests += 1
                run.fetched(r.day for r in page)
                if keyless := feed.keyless(page):
                    run.rows_skipped += len(keyless)
                    log.warning(
                        "%s of cabinet %s: skipped %d row(s) WB sent with an empty %s (srid %s): nothing to store "
                        "them by until WB sends them with it",
                        feed.name,
                        cabinet_id,
                        len(keyless),
                        "/".join(feed.key[1:]),
                        ", ".join(str(r.srid) for r in keyless),
                    )
                rows = feed.to_rows(page, cabinet_id, only_day)
                # The cursor comes from the rows of the present only: a row from the future is stored
                # and flagged, never where the next increment starts (it would ask WB for nothing).
                present = page.present()
                with conn.transaction():
                    run.merge += merge_rows(conn, feed.table, feed.columns, feed.key, rows, run_id=run_id)
                    run.screen(conn, page.screening)
                    if present:
                        newest = max(r.last_change_date for r in present)
                        keys = {str(getattr(r, feed.key_attr)) for r in present if r.last_change_date == newest}
                        if cursor is None or newest > cursor:
                            cursor, at_cursor = newest, keys
                        elif newest == cursor:
                            at_cursor |= keys
                        if cursor_feed is not None:
                            value = {"last_change_date": cursor.isoformat(), "keys_at": sorted(at_cursor)}
                            save_cursor(conn, cabinet_id, cursor_feed, value, run_id)
                if after_page is not None and page:
                    after_page(run)
                if inp.should_yield():
                    raise _Yield
        except (WbDeferred, _Yield) as stop:
            if isinstance(stop, WbDeferred):
                run.deferred_until, run.deferred_reason = stop.resume_at, str(stop)
            else:
                run.deferred_until, run.deferred_reason = now_moscow(), "yielded the cabinet to a user's run"
            with conn.transaction():
                mark_deferred(conn, cabinet_id, state_feed, run.deferred_until, run.deferred_reason)
                run.record(conn, status="skipped")
            return run
        except Exception as exc:
            note_stored(exc, run)
            with conn.transaction():
                run.record(conn, status="failure", error=f"{exc.__class__.__name__}: {exc}")
            raise
        with conn.transaction():
            if cursor_feed is not None:
                mark_success(conn, cabinet_id, cursor_feed, run_id)
            run.record(conn)
    return run


class _Yield(Exception):
    """Internal: a scheduled load stops between pages for a waiting user run."""


def increment_start(connect: Connect, feed: Feed, cabinet_id: str) -> tuple[datetime, frozenset[str]]:
    """Where the increment starts, and the keys already read there: the stored cursor minus the
    overlap, else (no cursor, or one from the future) WB's 90-day horizon. A load WB paused (or that yielded) goes on from exactly
    where it stopped, knowing the rows it read there: with no overlap, and WB's repeat of the
    stop's rows being nothing new, the rest may take one request. (With the overlap on every
    resume, sales' one request a minute never let an increment end: each resume re-read the last
    hour, and asking again for the end was always a minute away.)"""
    with connect() as conn:
        state = get_state(conn, cabinet_id, feed.name)
    if state.cursor and state.cursor.get("last_change_date"):
        at = datetime.fromisoformat(state.cursor["last_change_date"])
        if at <= now_moscow() + FUTURE_ALLOWANCE:
            if state.resume_at is not None:
                return at, frozenset(state.cursor.get("keys_at") or ())
            return at - INCREMENT_OVERLAP, frozenset()
        # A cursor from the future (saved before rows were screened, docs/data.md): WB has nothing
        # after it, and where the feed really stood is unknown: start over as a first increment does.
        log.warning(
            "%s of cabinet %s: the cursor %s is in the future; reading WB's last %d days again",
            feed.name,
            cabinet_id,
            at.isoformat(),
            WB_HORIZON_DAYS,
        )
    return window_start(now_moscow().date() - timedelta(days=WB_HORIZON_DAYS)), frozenset()


def window_start(day: date) -> datetime:
    """The first moment of a Moscow day, as WB's dateFrom."""
    return datetime.combine(day, time.min, tzinfo=MOSCOW)


def sync_increment(inp: SyncInput) -> list[FeedLoad]:
    """The increment (every 30 min): each feed from its stored cursor minus the overlap. A load
    stops at a page boundary when ``inp.should_yield()`` (a user's run waits for the cabinet)."""
    return _sync_feeds(inp, lambda feed: (*increment_start(inp.connect, feed, inp.cabinet_id), feed.name))


def sync_window(inp: SyncInput) -> list[FeedLoad]:
    """A window of WB's change feed: from ``inp.date_from`` (a user's import, which reports every
    day of its period as changed), else the last ``inp.window_days`` (the nightly backfill: 90)."""
    today = now_moscow().date()
    first = inp.date_from or today - timedelta(days=(inp.window_days or WB_HORIZON_DAYS) - 1)
    period = {first + timedelta(days=i) for i in range((today - first).days + 1)} if inp.date_from else set()
    return _sync_feeds(inp, lambda feed: (window_start(first), frozenset(), None), period)


def _sync_feeds(
    inp: SyncInput,
    start: Callable[[Feed], tuple[datetime, frozenset[str], str | None]],
    report_days: set[date] | None = None,
) -> list[FeedLoad]:
    """Orders, then sales, each from ``start(feed)`` (its dateFrom, the keys read there, the cursor feed
    to keep). Each run also reports ``report_days`` as changed. After each page of sales, the last
    feed, ``inp.on_progress`` gets both runs: the orders are whole then, and the sales so far."""
    runs: list[FeedLoad] = []

    def progress(run: FeedLoad) -> None:
        for r in (*runs, run):
            r.report_days.update(report_days or ())
        inp.on_progress([*runs, run])

    try:
        for feed in (ORDERS, SALES):
            date_from, seen, cursor_feed = start(feed)
            after_page = progress if feed is SALES else None
            run = load_feed(inp, feed, date_from, flag=0, cursor_feed=cursor_feed, seen=seen, after_page=after_page)
            run.report_days.update(report_days or ())
            runs.append(run)
            log.info("%s of %s from %s: %s", feed.name, inp.cabinet_id, date_from, run.summary())
    except Exception as exc:
        # The feeds loaded before stay committed: the job reports their days with the failed one's.
        note_stored(exc, *runs)
        raise
    return runs


# -- Partition loads ---------------------------------------------------------------------------


RANGE_MEMO_SUFFIX = ":range"


@dataclass(frozen=True)
class PartitionFetch:
    """How a `cabinet|day` partition run gets its data."""

    #: "day" (flag=1, exactly that day), "range" (flag=0 from the day: serves later days of the
    #: same backfill too) or "memo" (an earlier run of the same backfill already fetched it).
    mode: str
    date_from: date


def plan_partition_fetch(day: date, *, backfill_id: str | None, memo: dict[str, Any] | None) -> PartitionFetch:
    """Pure decision: a backfill of N days for one cabinet costs one WB fetch, not N.

    The runs of one cabinet's backfill are serialised by the cabinet gate. The first one fetches
    WB's change feed from its day (`flag=0`), which holds every row of that day and of all later
    days, and records a memo (backfill id, from-day). A later run of the same backfill whose day
    the memo covers needs no request: the backfill asked for the data as of its launch, and the
    memo's fetch is no older than that. Outside backfills a partition reloads exactly its day
    (`flag=1`, one request).
    """
    if backfill_id is None:
        return PartitionFetch("day", day)
    if memo is not None and memo.get("backfill") == backfill_id and date.fromisoformat(memo["from"]) <= day:
        return PartitionFetch("memo", date.fromisoformat(memo["from"]))
    return PartitionFetch("range", day)


def load_partition(inp: SyncInput, feed: Feed) -> FeedLoad:
    """The `cabinet|day` partition ``inp.day`` of ``feed``: that day exactly, or inside a backfill
    (``inp.backfill_id``) WB's change feed from it once for every later day of the backfill (see
    ``plan_partition_fetch``). ``inp.notes["fetch"]`` says which (day, range or memo)."""
    assert inp.day is not None
    day = inp.day
    memo_feed = feed.name + RANGE_MEMO_SUFFIX
    with inp.connect() as conn:
        memo = get_state(conn, inp.cabinet_id, memo_feed).cursor
    plan = plan_partition_fetch(day, backfill_id=inp.backfill_id, memo=memo)
    inp.notes["fetch"] = plan.mode
    if plan.mode == "memo":
        return FeedLoad(QUEUE, feed.asset, inp.cabinet_id, inp.run_id, inp.trigger)
    date_from, flag, only_day = (day, 1, day) if plan.mode == "day" else (window_start(day), 0, None)
    run = load_feed(inp, feed, date_from, flag=flag, only_day=only_day)
    if plan.mode == "range" and run.deferred_until is None:
        with inp.connect() as conn, conn.transaction():
            memo = {"from": day.isoformat(), "backfill": inp.backfill_id, "fetched_at": now_moscow().isoformat()}
            save_cursor(conn, inp.cabinet_id, memo_feed, memo, inp.run_id)
    return run


def sync_orders_day(inp: SyncInput) -> list[FeedLoad]:
    """The `wb_orders` partition ``inp.day`` (see ``load_partition``)."""
    return [load_partition(inp, ORDERS)]


def sync_sales_day(inp: SyncInput) -> list[FeedLoad]:
    """The `wb_sales` partition ``inp.day`` (see ``load_partition``)."""
    return [load_partition(inp, SALES)]
