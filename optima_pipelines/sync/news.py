"""WB news into the knowledge base (the original's `kb-wb-news-sync` queue) → ``kb_articles``.

News are WB's, not a cabinet's: any active cabinet's token may read them. The sync uses the
cabinet that served last time (else the first active one) and, when WB rejects that token (401),
goes on with the next cabinet. It is incremental by news id: the next request starts after the
highest id stored (``fromID``); the very first one from ``FIRST_SYNC_DAYS`` back.

WB allows one news request a minute. That limit is kept across every token, run and process: a
request is sent only under a PostgreSQL advisory lock and at least a minute after the end of the
previous one (``news_sync_state.last_request_at``), so a failed-over request, a manual run and the
schedule together still never send two requests within a minute. A run waits at most one interval
between its requests (news serve no cabinet and their queue runs one at a time, so this wait holds
no cabinet's slot) and stops after ``MAX_PAGES_PER_RUN`` pages; the next run goes on from the
stored id. The clients it is given must not resend by themselves (``max_attempts=1``): a 5xx or 429
is asked again in a later slot.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import psycopg

from optima_pipelines.db.connection import Connect
from optima_pipelines.errors import OptimaError
from optima_pipelines.load import merge_rows
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import KB_WB_NEWS_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinets import list_cabinets
from optima_pipelines.wb import News, WbAuthError, WbClient, WbDeferred, WbUnavailable
from optima_pipelines.wb.client import NEWS_MAX_ITEMS

QUEUE = KB_WB_NEWS_SYNC
FEED = "kb_articles"
#: WB: 1 news request a minute (burst 10 per seller); we never use the burst, across all tokens.
REQUEST_INTERVAL_SECONDS = 60.0
FIRST_SYNC_DAYS = 365
MAX_PAGES_PER_RUN = 10
#: A request WB answered with a 5xx or 429 is asked again in a later slot, this many times in all.
#: (Clients for news must not resend by themselves: a resend is a request too.)
REQUEST_ATTEMPTS = 3
#: ``kb_articles``: one row per news item (``article_row``).
COLUMNS = ("news_id", "header", "content", "published_at", "types")

log = get_logger(__name__)


class NoNewsToken(OptimaError):
    """No active cabinet's token could read WB's news."""


#: A PostgreSQL advisory lock (session level: released if the process dies) held by whoever is
#: sending a news request, so requests from any run or process go one after the other.
NEWS_LOCK_KEY = "optima:wb-news"
#: How long to wait for another process's news request to finish before giving up this turn.
LOCK_WAIT_SECONDS = 150


class Paused(Exception):
    """The next news request may only go later than the run may wait: ``until`` says when."""

    def __init__(self, until: datetime):
        super().__init__(until.isoformat())
        self.until = until


@contextmanager
def request_slot(connect: Connect, cabinet_id: str, interval: float, max_wait: float) -> Iterator[None]:
    """Send one news request inside this block, at least ``interval`` seconds after the end of the
    previous one (any run, any process); raises ``Paused`` when that is more than ``max_wait`` away."""
    with connect() as conn:
        conn.autocommit = True
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{LOCK_WAIT_SECONDS}s",))
        try:
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (NEWS_LOCK_KEY,))
        except psycopg.errors.LockNotAvailable:
            raise Paused(datetime.now(UTC) + timedelta(seconds=interval)) from None
        try:
            row = conn.execute(
                """SELECT last_request_at + make_interval(secs => %(i)s),
                          greatest(0, extract(epoch FROM last_request_at + make_interval(secs => %(i)s)
                                                         - clock_timestamp()))
                   FROM news_sync_state""",
                {"i": interval},
            ).fetchone()
            assert row is not None
            allowed, wait = row[0], float(row[1] or 0)
            if wait > max_wait:
                raise Paused(allowed)
            time.sleep(wait)
            # Noted before sending (a request cut short still counts) and again once it is answered.
            note = "UPDATE news_sync_state SET last_request_at = clock_timestamp(), last_cabinet_id = %s, updated_at = now()"
            conn.execute(note, (cabinet_id,))
            try:
                yield
            finally:
                conn.execute(note, (cabinet_id,))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (NEWS_LOCK_KEY,))


def article_row(n: News) -> tuple[Any, ...]:
    return (n.id, n.header, n.content, n.date, msgspec.json.encode(n.types).decode())


def news_cursor(connect: Connect) -> int | None:
    with connect() as conn:
        row = conn.execute("SELECT max(news_id) FROM kb_articles").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def token_order(connect: Connect, cabinets: Sequence[str]) -> list[str]:
    """The cabinets to try: the one that served last first, then the others in order."""
    with connect() as conn:
        row = conn.execute("SELECT last_cabinet_id FROM news_sync_state").fetchone()
    last = row[0] if row else None
    ordered = sorted(cabinets)
    return [last, *(c for c in ordered if c != last)] if last in ordered else ordered


def sync(inp: SyncInput) -> list[FeedLoad]:
    """Load new news with the first active cabinet's token WB accepts (``inp.client_for``): one
    FeedLoad, under the cabinet whose token served (``deferred_until``: it stopped early to keep
    WB's pace). ``inp.notes`` say whose tokens WB rejected on the way and how many pages came.
    Raises NoNewsToken when there is no cabinet, or WB rejected every token."""
    assert inp.client_for is not None, "the news sync reads with any cabinet's token: it needs client_for"
    with inp.connect() as conn:
        cabinets = [c.id for c in list_cabinets(conn, status="active") if c.has_token]
    if not cabinets:
        raise NoNewsToken("no active cabinet with a WB token to read the news with")
    rejected: list[str] = []
    inp.notes.update(rejected_tokens_of=rejected, pages=0)
    last_error = ""
    for cabinet_id in token_order(inp.connect, cabinets):
        run = FeedLoad(QUEUE, FEED, cabinet_id, inp.run_id, inp.trigger)
        with inp.client_for(cabinet_id) as client:
            try:
                _sync_with(inp, client, run)
                return [run]
            except WbAuthError as exc:
                log.warning("WB rejected the news request with cabinet %s's token; trying the next cabinet", cabinet_id)
                rejected.append(cabinet_id)
                # Pages stored before the rejection stay, and are counted.
                with inp.connect() as conn, conn.transaction():
                    run.record(conn, status="failure", error=str(exc))
                last_error = str(exc)
    raise NoNewsToken(
        f"WB rejected the token of every active cabinet for the news ({', '.join(rejected)}); last: {last_error}"
    )


def _sync_with(inp: SyncInput, client: WbClient, run: FeedLoad) -> None:
    """Page after page with one cabinet's token, each page in a request slot of its own, until WB
    has no more, the run's MAX_PAGES_PER_RUN are done, or the next slot is too far away."""
    interval = REQUEST_INTERVAL_SECONDS / client.config.time_scale
    failures = 0
    while inp.notes["pages"] < MAX_PAGES_PER_RUN:
        try:
            with request_slot(inp.connect, run.cabinet_id, interval, interval + 1):
                # One request per slot: each page is asked for on its own, from the stored cursor.
                last_id = news_cursor(inp.connect)
                if last_id is not None:
                    pages = client.iter_news(from_id=last_id + 1)
                else:
                    pages = client.iter_news(from_date=today_moscow() - timedelta(days=FIRST_SYNC_DAYS))
                run.requests += 1
                page = next(pages, None)
        except Paused as paused:
            run.deferred_until, run.deferred_reason = paused.until, "WB's one news request a minute"
            break
        except WbDeferred as deferred:
            run.deferred_until, run.deferred_reason = deferred.resume_at, str(deferred)
            break
        except WbUnavailable:
            failures += 1
            if failures >= REQUEST_ATTEMPTS:
                raise
            continue
        failures = 0
        if page is None:
            break
        inp.notes["pages"] += 1
        run.fetched([None] * len(page))
        with inp.connect() as conn, conn.transaction():
            run.merge += merge_rows(conn, FEED, COLUMNS, ("news_id",), [article_row(n) for n in page], day_column=None)
            run.screen(conn, page.screening)
        if len(page) + len(page.screening.refused) < NEWS_MAX_ITEMS or not page:
            break
    with inp.connect() as conn, conn.transaction():
        run.record(conn)
