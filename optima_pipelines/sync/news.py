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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import psycopg

from optima_pipelines.errors import OptimaError
from optima_pipelines.load import merge_rows
from optima_pipelines.logs import get_logger
from optima_pipelines.orchestration.queues import KB_WB_NEWS_SYNC
from optima_pipelines.sync.runs import Connect, SyncRun
from optima_pipelines.timeutil import today_moscow
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
COLUMNS = News.COLUMNS

log = get_logger(__name__)


class NoNewsToken(OptimaError):
    """No active cabinet's token could read WB's news."""


@dataclass
class NewsRun:
    """What a news sync did: its figures (under the cabinet whose token served), the tokens WB
    rejected on the way, and whether it stopped early to keep WB's pace."""

    run: SyncRun | None = None
    rejected: list[str] = field(default_factory=list)
    pages: int = 0
    paused_until: datetime | None = None

    def summary(self) -> dict[str, object]:
        return {
            **(self.run.summary() if self.run else {}),
            "cabinet": self.run.cabinet_id if self.run else None,
            "rejected_tokens_of": self.rejected,
            "pages": self.pages,
            "paused_until": self.paused_until.isoformat() if self.paused_until else None,
        }


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
def request_slot(
    connect: Connect, cabinet_id: str, interval: float, max_wait: float, sleep: Callable[[float], None]
) -> Iterator[None]:
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
            sleep(wait)
            # Noted before sending (a request cut short still counts) and again once it is answered.
            note = "UPDATE news_sync_state SET last_request_at = clock_timestamp(), last_cabinet_id = %s, updated_at = now()"
            conn.execute(note, (cabinet_id,))
            try:
                yield
            finally:
                conn.execute(note, (cabinet_id,))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (NEWS_LOCK_KEY,))


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


def sync_news(
    connect: Connect,
    client_for: Callable[[str], WbClient],
    cabinets: Sequence[str],
    *,
    run_id: str | None,
    trigger: str,
    time_scale: float = 1.0,
    max_pages: int = MAX_PAGES_PER_RUN,
    sleep: Callable[[float], None] = time.sleep,
    today: date | None = None,
) -> NewsRun:
    """Load new news with the first active cabinet's token WB accepts. Raises NoNewsToken when
    there is no cabinet, or WB rejected every token."""
    if not cabinets:
        raise NoNewsToken("no active cabinet with a WB token to read the news with")
    interval = REQUEST_INTERVAL_SECONDS / time_scale
    result = NewsRun()
    last_error = ""
    for cabinet_id in token_order(connect, cabinets):
        with client_for(cabinet_id) as client:
            try:
                _sync_with(connect, client, cabinet_id, result, interval, max_pages, sleep, run_id, trigger, today)
                return result
            except WbAuthError as exc:
                log.warning("WB rejected the news request with cabinet %s's token; trying the next cabinet", cabinet_id)
                result.rejected.append(cabinet_id)
                if result.run is not None:  # pages stored before the rejection stay, and are counted
                    with connect() as conn, conn.transaction():
                        result.run.record(conn, status="failure", error=str(exc))
                result.run = None
                last_error = str(exc)
    raise NoNewsToken(
        f"WB rejected the token of every active cabinet for the news ({', '.join(result.rejected)}); last: {last_error}"
    )


def _sync_with(
    connect: Connect,
    client: WbClient,
    cabinet_id: str,
    result: NewsRun,
    interval: float,
    max_pages: int,
    sleep: Callable[[float], None],
    run_id: str | None,
    trigger: str,
    today: date | None,
) -> None:
    run = result.run = SyncRun(QUEUE, FEED, cabinet_id, run_id, trigger)
    failures = 0
    while result.pages < max_pages:
        try:
            with request_slot(connect, cabinet_id, interval, interval + 1, sleep):
                # One request per slot: each page is asked for on its own, from the stored cursor.
                last_id = news_cursor(connect)
                if last_id is not None:
                    pages = client.iter_news(from_id=last_id + 1)
                else:
                    pages = client.iter_news(from_date=(today or today_moscow()) - timedelta(days=FIRST_SYNC_DAYS))
                run.requests += 1
                page = next(pages, None)
        except Paused as paused:
            result.paused_until = paused.until
            break
        except WbDeferred as deferred:
            result.paused_until = deferred.resume_at
            break
        except WbUnavailable:
            failures += 1
            if failures >= REQUEST_ATTEMPTS:
                raise
            continue
        failures = 0
        if page is None:
            break
        result.pages += 1
        run.fetched([None] * len(page))
        with connect() as conn, conn.transaction():
            run.merge += merge_rows(conn, FEED, COLUMNS, ("news_id",), [n.copy_row() for n in page], day_column=None)
        if len(page) < NEWS_MAX_ITEMS:
            break
    with connect() as conn, conn.transaction():
        run.record(conn)
