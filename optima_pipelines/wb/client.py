"""``WbClient``: every WB method the pipelines use, typed, with WB's paging handled inside.

Paging rules, by how WB bounds a response:
- a soft cap WB chooses (statistics' ~80k rows): page until WB answers ``[]``;
- the finance report: WB's documented contract is "request the next page until 204", and a page
  shorter than the limit need not be the last: page until 204 (or ``[]``);
- a ``limit`` the request sets (prices, funnel, stocks, feedbacks, news): a page shorter than the
  limit is the last one;
- a cursor (content cards): until WB's ``cursor.total`` falls below the limit.

Iterators yield one list per WB page, so a caller can store each page before the next request; if
a later request fails or is deferred, the pages already yielded stay valid and complete.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import date, datetime, timedelta
from typing import Any, TypeVar

import msgspec

from optima_pipelines.timeutil import as_moscow
from optima_pipelines.wb.config import CATEGORIES, WbConfig
from optima_pipelines.wb.errors import WbRequestError
from optima_pipelines.wb.http import Endpoint, Lander, Transport, token_type_of
from optima_pipelines.wb.limiter import RateLimiter
from optima_pipelines.wb.limits import ping_group
from optima_pipelines.wb.models.advertising import (
    AdStat,
    BidUpdate,
    Campaign,
    CampaignRef,
    MinBid,
    PromotionCount,
    _AdvertsResponse,
    _BidsResponse,
    _MinBidsResponse,
    _StatsCampaign,
    ad_stats_from,
)
from optima_pipelines.wb.models.analytics import (
    FunnelProduct,
    Stock,
    _FunnelProductsResponse,
    _StocksResponse,
)
from optima_pipelines.wb.models.common import AcceptanceCoefficient, News, Ping, _NewsResponse
from optima_pipelines.wb.models.content import CardsCursor, CardsPage, _CardsResponse
from optima_pipelines.wb.models.feedbacks import (
    Feedback,
    Question,
    _EnvelopeResponse,
    _FeedbackResponse,
    _FeedbacksResponse,
    _QuestionResponse,
    _QuestionsResponse,
)
from optima_pipelines.wb.models.finance import ReportLine
from optima_pipelines.wb.models.prices import (
    PRICE_TASK_DONE_STATUSES,
    PRICE_TASK_PROCESSING,
    Price,
    PriceTaskItem,
    PriceTaskResult,
    PriceUpdate,
    _GoodsResponse,
    _HistoryGoodsResponse,
    _TaskInfo,
    _TaskResponse,
    _UploadResponse,
)
from optima_pipelines.wb.models.statistics import Order, Sale
from optima_pipelines.wb.screening import Page, Screening

T = TypeVar("T")

ORDERS = Endpoint("GET", "statistics", "/api/v1/supplier/orders", "statistics.orders")
SALES = Endpoint("GET", "statistics", "/api/v1/supplier/sales", "statistics.sales")
REPORT = Endpoint("POST", "finance", "/api/finance/v1/sales-reports/detailed", "finance.detailed")
PROMOTION_COUNT = Endpoint("GET", "advert", "/adv/v1/promotion/count", "advert.count")
ADVERTS = Endpoint("GET", "advert", "/api/advert/v2/adverts", "advert.adverts")
FULLSTATS = Endpoint("GET", "advert", "/adv/v3/fullstats", "advert.fullstats")
BIDS = Endpoint("PATCH", "advert", "/api/advert/v1/bids", "advert.bids", write=True)
MIN_BIDS = Endpoint("POST", "advert", "/api/advert/v1/bids/min", "advert.bids_min")
FUNNEL_PRODUCTS = Endpoint("POST", "analytics", "/api/analytics/v3/sales-funnel/products", "analytics.funnel")
STOCKS = Endpoint("POST", "analytics", "/api/analytics/v1/stocks-report/wb-warehouses", "analytics.stocks")
CARDS = Endpoint("POST", "content", "/content/v2/get/cards/list", "content")
PRICES = Endpoint("GET", "prices", "/api/v2/list/goods/filter", "prices")
UPLOAD_PRICES = Endpoint("POST", "prices", "/api/v2/upload/task", "prices", write=True)
PRICE_TASK = Endpoint("GET", "prices", "/api/v2/history/tasks", "prices")
PRICE_TASK_GOODS = Endpoint("GET", "prices", "/api/v2/history/goods/task", "prices")
PRICE_BUFFER_TASK = Endpoint("GET", "prices", "/api/v2/buffer/tasks", "prices")
FEEDBACKS = Endpoint("GET", "feedbacks", "/api/v1/feedbacks", "feedbacks")
FEEDBACK = Endpoint("GET", "feedbacks", "/api/v1/feedback", "feedbacks")
ANSWER_FEEDBACK = Endpoint("POST", "feedbacks", "/api/v1/feedbacks/answer", "feedbacks", write=True)
QUESTIONS = Endpoint("GET", "feedbacks", "/api/v1/questions", "feedbacks")
QUESTION = Endpoint("GET", "feedbacks", "/api/v1/question", "feedbacks")
ANSWER_QUESTION = Endpoint("PATCH", "feedbacks", "/api/v1/questions", "feedbacks", write=True)
ACCEPTANCE = Endpoint("GET", "common", "/api/tariffs/v1/acceptance/coefficients", "common.acceptance")
NEWS = Endpoint("GET", "common", "/api/communications/v2/news", "common.news")

#: WB's documented bounds per request.
FULLSTATS_MAX_IDS = 50
FULLSTATS_MAX_DAYS = 31
BIDS_MAX_ADVERTS = 50
BIDS_MAX_NMS = 50
MIN_BIDS_MAX_NMS = 100
FUNNEL_MAX_NMS = 1000
STOCKS_MAX_NMS = 1000
PRICE_TASK_MAX_ITEMS = 1000
FEEDBACKS_MAX_SKIP = 199_990
QUESTIONS_MAX_SKIP_TAKE = 10_000
NEWS_MAX_ITEMS = 100
ANSWER_TEXT = (2, 5000)


class _RrdId(msgspec.Struct, gc=False):
    """A report line's cursor alone: where the next page starts when a line of the page was refused."""

    rrd_id: int = msgspec.field(name="rrdId")


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _statistics_date(value: date | datetime) -> str:
    """WB's statistics ``dateFrom``: Moscow wall time without a zone, to the microsecond given."""
    if isinstance(value, datetime):
        return as_moscow(value).replace(tzinfo=None).isoformat()
    return value.isoformat()


def _date_windows(begin: date, end: date, days: int) -> Iterator[tuple[date, date]]:
    start = begin
    while start <= end:
        stop = min(end, start + timedelta(days=days - 1))
        yield start, stop
        start = stop + timedelta(days=1)


class WbClient:
    """The WB seller API for one cabinet. Thread-safe; close it (or use ``with``) when done.

    ``token_type`` selects WB's limit rows (personal, service, base_with_secret, base, test);
    ``"auto"`` reads it from the token. ``limiter`` defaults to the process-wide in-memory one;
    give ``RateLimiter(PostgresLimiterStore(...))`` to share buckets across processes and runs.
    ``landing`` keeps every answer to a read as it came (landing/store.py) before it is decoded.
    """

    def __init__(
        self,
        cabinet_id: str,
        token: str,
        *,
        config: WbConfig | None = None,
        limiter: RateLimiter | None = None,
        token_type: str = "personal",
        sleep: Callable[[float], None] = time.sleep,
        event_hooks: dict[str, list[Callable[..., Any]]] | None = None,
        landing: Lander | None = None,
        transport: Transport | None = None,
    ):
        if token_type == "auto":
            token_type = token_type_of(token) or "personal"
        self.cabinet_id = cabinet_id
        self.config = config or WbConfig.from_env()
        self.limiter = limiter or RateLimiter()
        self._sleep = sleep
        # ``transport``: another way to get WB's answers (a replay's, from the landing: landing/replay.py).
        self._t = transport or Transport(
            cabinet_id,
            token,
            config=self.config,
            limiter=self.limiter,
            token_type=token_type,
            sleep=sleep,
            event_hooks=event_hooks,
            landing=landing,
        )

    @property
    def token_type(self) -> str:
        return self._t.token_type

    @property
    def answered_at(self) -> datetime | None:
        """When WB's last answer came (a replayed client: when the landed answer came): the moment a
        snapshot (stocks, prices) was WB's."""
        return self._t.answered_at

    def __repr__(self) -> str:
        return f"WbClient(cabinet_id={self.cabinet_id!r}, token_type={self.token_type!r}, limiter={self.limiter!r})"

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> WbClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(
        self, endpoint: Endpoint, model: type[T], *, params: dict[str, Any] | None = None, empty: T | None = None
    ) -> T:
        response = self._t.call(endpoint, params=params)
        assert response is not None  # reads always return their response
        return self._t.decode(endpoint, response, model, empty=empty)

    def _post(self, endpoint: Endpoint, model: type[T], body: Any, *, empty: T | None = None) -> T:
        response = self._t.call(endpoint, json_body=body)
        assert response is not None
        return self._t.decode(endpoint, response, model, empty=empty)

    def _rows(
        self,
        endpoint: Endpoint,
        model: type[T],
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        empty: T | None = None,
    ) -> tuple[T, Screening]:
        """An answer that holds rows, each judged on its own (``wb.screening``)."""
        response = self._t.call(endpoint, params=params, json_body=body)
        assert response is not None
        return self._t.decode_rows(endpoint, response, model, empty=empty)

    def _refuse(self, endpoint: Endpoint, detail: str) -> WbRequestError:
        """A request we will not send because WB would refuse it (bad arguments)."""
        return WbRequestError(cabinet_id=self.cabinet_id, endpoint=str(endpoint), status=None, detail=detail)

    def _answered_error(self, endpoint: Endpoint, error_text: str) -> WbRequestError:
        """WB answered HTTP 200 with ``error: true``: the request was sent and answered, and WB says
        it failed (``errorText``)."""
        detail = f"answered error: true, {error_text or 'without an errorText'}"
        return WbRequestError(cabinet_id=self.cabinet_id, endpoint=str(endpoint), status=200, detail=detail)

    # --- statistics: orders, sales and returns ---------------------------------------------------

    def iter_orders(
        self, date_from: datetime | date, *, flag: int = 0, seen: Collection[str] = ()
    ) -> Iterator[Page[Order]]:
        """Orders changed since ``date_from`` (flag 0, every page to the end) or placed on its day
        (flag 1, one request). Each order once, even when WB repeats it at a page boundary.
        ``seen``: the srids already read whose lastChangeDate is exactly ``date_from`` (a load that
        goes on from where it stopped): WB sends them again and they do not count as new."""
        return self._iter_statistics(ORDERS, list[Order], "srid", date_from, flag, seen)

    def iter_sales(
        self, date_from: datetime | date, *, flag: int = 0, seen: Collection[str] = ()
    ) -> Iterator[Page[Sale]]:
        """Sales and returns (``sale_id`` S…/R…), like ``iter_orders``; de-duplicated by saleID."""
        return self._iter_statistics(SALES, list[Sale], "sale_id", date_from, flag, seen)

    def _iter_statistics(
        self,
        endpoint: Endpoint,
        model: Any,
        key: str,
        date_from: datetime | date,
        flag: int,
        seen: Collection[str] = (),
    ) -> Iterator[Page[Any]]:
        if flag not in (0, 1):
            raise self._refuse(endpoint, f"flag must be 0 or 1, got {flag!r}")
        if flag == 1:
            day = as_moscow(date_from).date() if isinstance(date_from, datetime) else date_from
            rows, screening = self._rows(endpoint, model, params={"dateFrom": day.isoformat(), "flag": 1})
            if rows or screening:
                yield Page(rows, screening)
            return
        cursor = _statistics_date(date_from)
        # Going on from a stop: the rows at the stop's lastChangeDate that were read come again.
        boundary: datetime | None = date_from if seen and isinstance(date_from, datetime) else None
        boundary_keys: set[str] = set(seen) if boundary is not None else set()
        while True:
            answer, screening = self._rows(endpoint, model, params={"dateFrom": cursor, "flag": 0})
            rows = Page(answer, screening)
            # WB answers rows with lastChangeDate >= dateFrom, so the rows at the boundary come again.
            fresh = Page(
                [r for r in rows if r.last_change_date != boundary or getattr(r, key) not in boundary_keys], screening
            )
            present = rows.present()
            if not present:
                # Nothing of the present to go on from: WB's rows are in lastChangeDate order, so a
                # page of refused rows or of rows from the future only is the end of the feed.
                if fresh or screening:
                    yield fresh
                return
            if len(fresh) == 0 and not screening:
                return
            last = present[-1].last_change_date
            if boundary is not None and last < boundary:
                raise self._t.fail(endpoint, f"lastChangeDate went backwards ({last} after {boundary})")
            at_last = {getattr(r, key) for r in present if r.last_change_date == last}
            boundary_keys = boundary_keys | at_last if last == boundary else at_last
            boundary = last
            cursor = _statistics_date(last)
            yield fresh
            if len(present) < len(rows) or not [r for r in fresh if not screening.is_flagged(r)]:
                return  # the page reached the future (rows come in time order), or nothing new came

    # --- finance: the realization report ---------------------------------------------------------

    def iter_report_lines(
        self, date_from: date, date_to: date, *, period: str = "daily", limit: int = 100_000, after_rrd_id: int = 0
    ) -> Iterator[Page[ReportLine]]:
        """Realization report lines of ``[date_from, date_to]``, page by page along WB's rrdId
        cursor, until WB answers 204 (or ``[]``): a page shorter than ``limit`` is not the end.
        Every report that completes ends with that one request which yields nothing.
        ``after_rrd_id`` resumes after the last line of a page already stored."""
        if period not in ("daily", "weekly"):
            raise self._refuse(REPORT, f"period must be daily or weekly, got {period!r}")
        if not 1 <= limit <= 100_000:
            raise self._refuse(REPORT, f"limit must be 1..100000, got {limit}")
        rrd_id = after_rrd_id
        while True:
            body = {
                "dateFrom": date_from.isoformat(),
                "dateTo": date_to.isoformat(),
                "limit": limit,
                "rrdId": rrd_id,
                "period": period,
            }
            response = self._t.call(REPORT, json_body=body)
            assert response is not None
            lines, screening = self._t.decode_rows(REPORT, response, list[ReportLine], empty=[])
            if not lines and not screening:
                return
            last = max((line.rrd_id for line in lines), default=0)
            if screening.refused:
                # A refused line still moves the cursor: WB's next page starts after the page's last line.
                try:
                    last = max(last, *(r.rrd_id for r in msgspec.json.decode(response.content, type=list[_RrdId])))
                except msgspec.ValidationError:
                    pass  # a line without a readable rrdId: go on after the last line read
            if last <= rrd_id:
                raise self._t.fail(REPORT, f"rrdId did not advance ({last} after {rrd_id})", "rrdId")
            rrd_id = last
            yield Page(lines, screening)

    # --- advertising -----------------------------------------------------------------------------

    def campaign_refs(self) -> list[CampaignRef]:
        """Every campaign's id, type, status and last change (``GET /adv/v1/promotion/count``)."""
        counts = self._get(PROMOTION_COUNT, PromotionCount)
        return [
            CampaignRef(advert_id=a.advert_id, type=g.type, status=g.status, change_time=a.change_time)
            for g in counts.adverts or ()
            for a in g.advert_list or ()
        ]

    def list_campaigns(
        self,
        ids: Iterable[int] | None = None,
        *,
        statuses: Iterable[int] | None = None,
        payment_type: str | None = None,
    ) -> Page[Campaign]:
        """Campaigns with their products and bids (``GET /api/advert/v2/adverts``), by ids (≤ 50 a
        request, split here) and/or statuses and payment type."""
        params: dict[str, Any] = {}
        if statuses is not None:
            params["statuses"] = ",".join(str(s) for s in statuses)
        if payment_type is not None:
            params["payment_type"] = payment_type
        if ids is None:
            response, screening = self._rows(ADVERTS, _AdvertsResponse, params=params)
            return Page(response.adverts, screening)
        campaigns: Page[Campaign] = Page()
        for chunk in _chunks(list(dict.fromkeys(ids)), FULLSTATS_MAX_IDS):
            response, screening = self._rows(
                ADVERTS, _AdvertsResponse, params={**params, "ids": ",".join(map(str, chunk))}
            )
            campaigns.extend(response.adverts)
            campaigns.screening.add(screening)
        return campaigns

    def iter_fullstats(self, advert_ids: Iterable[int], begin: date, end: date) -> Iterator[Page[AdStat]]:
        """Ad statistics per campaign, day, app and product, one list per WB request: ids in
        chunks of 50, dates in windows of 31 days."""
        ids = list(dict.fromkeys(advert_ids))
        if begin > end:
            raise self._refuse(FULLSTATS, f"begin {begin} is after end {end}")
        for window_begin, window_end in _date_windows(begin, end, FULLSTATS_MAX_DAYS):
            for chunk in _chunks(ids, FULLSTATS_MAX_IDS):
                params = {
                    "ids": ",".join(map(str, chunk)),
                    "beginDate": window_begin.isoformat(),
                    "endDate": window_end.isoformat(),
                }
                campaigns, screening = self._rows(FULLSTATS, list[_StatsCampaign], params=params, empty=[])
                yield Page(ad_stats_from(campaigns), screening)

    def fullstats(self, advert_ids: Iterable[int], begin: date, end: date) -> Page[AdStat]:
        """All of ``iter_fullstats`` in one list."""
        stats: Page[AdStat] = Page()
        for page in self.iter_fullstats(advert_ids, begin, end):
            stats.extend(page)
            stats.screening.add(page.screening)
        return stats

    def set_bids(self, bids: Sequence[BidUpdate]) -> list[BidUpdate]:
        """Set product bids (kopecks) with ``PATCH /api/advert/v1/bids``, ≤ 50 campaigns × 50
        products a request. After a failure WB may have acted on, the campaigns' current bids are
        read back: matching bids count as set, others are sent again. Returns the bids WB confirmed."""
        if not bids:
            return []
        for b in bids:
            if b.placement not in ("combined", "search", "recommendations"):
                raise self._refuse(BIDS, f"placement must be combined, search or recommendations, got {b.placement!r}")
            if b.bid_kopecks <= 0:
                raise self._refuse(BIDS, f"bid of advert {b.advert_id} nm {b.nm_id} must be positive kopecks")
        by_advert: dict[int, list[BidUpdate]] = {}
        for b in bids:
            by_advert.setdefault(b.advert_id, []).append(b)
        # Each request: ≤ 50 campaigns with ≤ 50 products each.
        parts = [(advert, chunk) for advert, items in by_advert.items() for chunk in _chunks(items, BIDS_MAX_NMS)]
        confirmed: list[BidUpdate] = []
        for request in _chunks(parts, BIDS_MAX_ADVERTS):
            sent = [b for _, chunk in request for b in chunk]
            body = {
                "bids": [
                    {
                        "advert_id": advert,
                        "nm_bids": [
                            {"nm_id": b.nm_id, "bid_kopecks": b.bid_kopecks, "placement": b.placement} for b in chunk
                        ],
                    }
                    for advert, chunk in request
                ]
            }
            response = self._t.call(BIDS, json_body=body, verify=functools.partial(self._bids_in_place, sent))
            if response is None:
                confirmed.extend(sent)
                continue
            echo = self._t.decode(BIDS, response, _BidsResponse)
            confirmed.extend(
                BidUpdate(advert_id=a.advert_id, nm_id=n.nm_id, bid_kopecks=n.bid_kopecks, placement=n.placement)
                for a in echo.bids
                for n in a.nm_bids
            )
        return confirmed

    def _bids_in_place(self, bids: Sequence[BidUpdate]) -> bool:
        current = {
            (c.id, p.nm_id): p.bids_kopecks
            for c in self.list_campaigns({b.advert_id for b in bids})
            for p in c.products
        }
        for b in bids:
            have = current.get((b.advert_id, b.nm_id))
            if have is None:
                return False
            if b.placement in ("search", "combined") and have.search != b.bid_kopecks:
                return False
            if b.placement in ("recommendations", "combined") and have.recommendations != b.bid_kopecks:
                return False
        return True

    def min_bids(
        self,
        advert_id: int,
        nm_ids: Iterable[int],
        *,
        payment_type: str = "cpm",
        placement_types: Sequence[str] = ("combined", "search", "recommendation"),
    ) -> dict[int, list[MinBid]]:
        """Minimum bids (kopecks) per product and placement type; ≤ 100 products a request."""
        result: dict[int, list[MinBid]] = {}
        for chunk in _chunks(list(dict.fromkeys(nm_ids)), MIN_BIDS_MAX_NMS):
            body = {
                "advert_id": advert_id,
                "nm_ids": list(chunk),
                "payment_type": payment_type,
                "placement_types": list(placement_types),
            }
            for item in self._post(MIN_BIDS, _MinBidsResponse, body).bids:
                result[item.nm_id] = item.bids
        return result

    # --- analytics -------------------------------------------------------------------------------

    def funnel_products(
        self,
        begin: date,
        end: date,
        *,
        nm_ids: Sequence[int] | None = None,
        past: tuple[date, date] | None = None,
        limit: int = 1000,
    ) -> Page[FunnelProduct]:
        """Each product's funnel over ``[begin, end]`` (and ``past`` for comparison), every page."""
        products: Page[FunnelProduct] = Page()
        nm_chunks: list[Sequence[int]] = list(_chunks(list(nm_ids), FUNNEL_MAX_NMS)) if nm_ids else [[]]
        for chunk in nm_chunks:
            offset = 0
            while True:
                body: dict[str, Any] = {
                    "selectedPeriod": {"start": begin.isoformat(), "end": end.isoformat()},
                    "nmIds": list(chunk),
                    "limit": limit,
                    "offset": offset,
                }
                if past is not None:
                    body["pastPeriod"] = {"start": past[0].isoformat(), "end": past[1].isoformat()}
                response, screening = self._rows(FUNNEL_PRODUCTS, _FunnelProductsResponse, body=body)
                page = response.data.products
                products.extend(page)
                products.screening.add(screening)
                if len(page) + len(screening.refused) < limit:
                    break
                offset += limit
        return products

    def iter_stocks(
        self, nm_ids: Sequence[int] | None = None, chrt_ids: Sequence[int] | None = None, *, limit: int = 250_000
    ) -> Iterator[Page[Stock]]:
        """Stocks on WB warehouses per product size (the analytics stocks report), page by page."""
        nm_chunks: list[Sequence[int]] = list(_chunks(list(nm_ids), STOCKS_MAX_NMS)) if nm_ids else [[]]
        for chunk in nm_chunks:
            offset = 0
            while True:
                body = {"nmIds": list(chunk), "chrtIds": list(chrt_ids or ()), "limit": limit, "offset": offset}
                response, screening = self._rows(STOCKS, _StocksResponse, body=body)
                page = Page(response.data.items, screening)
                if page or screening:
                    yield page
                if len(page) + len(screening.refused) < limit:
                    break
                offset += limit

    # --- content ---------------------------------------------------------------------------------

    def iter_cards(
        self, *, cursor: CardsCursor | None = None, limit: int = 100, with_photo: int = -1
    ) -> Iterator[CardsPage]:
        """Product cards, oldest change first, from ``cursor`` (None: from the start). Each page's
        ``cursor`` resumes after it (keep the last one for an incremental sync)."""
        if not 1 <= limit <= 100:
            raise self._refuse(CARDS, f"limit must be 1..100, got {limit}")
        while True:
            wb_cursor: dict[str, Any] = {"limit": limit}
            if cursor is not None:
                wb_cursor.update(updatedAt=cursor.updated_at, nmID=cursor.nm_id)
            body = {"settings": {"sort": {"ascending": True}, "filter": {"withPhoto": with_photo}, "cursor": wb_cursor}}
            response, screening = self._rows(CARDS, _CardsResponse, body=body)
            page = CardsPage(response.cards, screening)
            if response.cursor.updated_at is not None and response.cursor.nm_id is not None:
                cursor = CardsCursor(response.cursor.updated_at, response.cursor.nm_id)
            page.cursor = cursor
            if page or screening:
                yield page
            if response.cursor.total < limit or not (page or screening.refused):
                return

    # --- prices ----------------------------------------------------------------------------------

    def iter_prices(self, *, limit: int = 1000) -> Iterator[Page[Price]]:
        """Current prices and discounts of every product, page by page (offset)."""
        if not 1 <= limit <= 1000:
            raise self._refuse(PRICES, f"limit must be 1..1000, got {limit}")
        offset = 0
        while True:
            response, screening = self._rows(PRICES, _GoodsResponse, params={"limit": limit, "offset": offset})
            page = Page(response.data.list_goods, screening)
            if page or screening:
                yield page
            if len(page) + len(screening.refused) < limit:
                return
            offset += limit

    def upload_prices(self, items: Sequence[PriceUpdate]) -> int:
        """Start a price/discount task for ≤ 1000 products; returns WB's task id.

        Safe to repeat: WB answers an identical task with 208 and the existing id, so after a
        failure WB may have acted on, the same task is sent again and WB's answer settles it."""
        if not 1 <= len(items) <= PRICE_TASK_MAX_ITEMS:
            raise self._refuse(UPLOAD_PRICES, f"a price task takes 1..{PRICE_TASK_MAX_ITEMS} items, got {len(items)}")
        seen: set[int] = set()
        for item in items:
            if item.nm_id in seen:
                raise self._refuse(UPLOAD_PRICES, f"nm {item.nm_id} appears twice in one task")
            seen.add(item.nm_id)
            if item.price is None and item.discount is None:
                raise self._refuse(UPLOAD_PRICES, f"nm {item.nm_id}: give a price, a discount or both")
            if item.price is not None and item.price <= 0:
                raise self._refuse(UPLOAD_PRICES, f"nm {item.nm_id}: price must be positive, got {item.price}")
            if item.discount is not None and not 0 <= item.discount < 100:
                raise self._refuse(UPLOAD_PRICES, f"nm {item.nm_id}: discount must be 0..99 %, got {item.discount}")
        body = {
            "data": [
                {k: v for k, v in (("nmID", i.nm_id), ("price", i.price), ("discount", i.discount)) if v is not None}
                for i in items
            ]
        }
        response = self._t.call(UPLOAD_PRICES, json_body=body, idempotent=True)
        assert response is not None
        result = self._t.decode(UPLOAD_PRICES, response, _UploadResponse)
        if result.data is None:
            raise self._t.fail(UPLOAD_PRICES, f"no task id in the answer ({result.errorText or 'no text'})", "$.data")
        return result.data.id

    def price_task(self, task_id: int) -> PriceTaskResult:
        """Where a price task stands now, with each item's status once WB processed it. WB's
        ``error: true`` (a failed task, not one still processing) is a WbRequestError with its text."""
        task = self._price_task_info(PRICE_TASK, task_id)
        if task is None or task.status not in PRICE_TASK_DONE_STATUSES:
            buffered = self._price_task_info(PRICE_BUFFER_TASK, task_id)
            status = buffered.status if buffered is not None else PRICE_TASK_PROCESSING
            return PriceTaskResult(upload_id=task_id, status=status, items=[])
        items: list[PriceTaskItem] = []
        offset = 0
        while True:
            params = {"uploadID": task_id, "limit": 1000, "offset": offset}
            data = self._get(PRICE_TASK_GOODS, _HistoryGoodsResponse, params=params).data
            page = (data.history_goods if data else None) or []
            items.extend(page)
            if len(page) < 1000:
                break
            offset += 1000
        return PriceTaskResult(upload_id=task_id, status=task.status, items=items)

    def _price_task_info(self, endpoint: Endpoint, task_id: int) -> _TaskInfo | None:
        response = self._get(endpoint, _TaskResponse, params={"uploadID": task_id})
        if response.error:
            raise self._answered_error(endpoint, response.errorText)
        return response.data

    def wait_price_task(self, task_id: int, *, timeout: float = 60.0) -> PriceTaskResult:
        """Poll a price task until WB processed it or ``timeout`` seconds passed (then the result is
        still processing: ``done`` is False). A task WB answers with ``error: true`` raises at once."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.price_task(task_id)
            if result.done:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            self._sleep(min(self.config.poll_interval_seconds / self.config.time_scale, remaining))

    # --- feedbacks and questions -----------------------------------------------------------------

    def iter_feedbacks(
        self,
        *,
        is_answered: bool,
        take: int = 5000,
        order: str = "dateAsc",
        nm_id: int | None = None,
        date_from: datetime | None = None,
        date_to: datetime | None = None,
    ) -> Iterator[list[Feedback]]:
        """Feedbacks (answered or not), page by page (skip/take, ≤ 5000 a page)."""
        if not 1 <= take <= 5000:
            raise self._refuse(FEEDBACKS, f"take must be 1..5000, got {take}")
        params = self._comm_params(is_answered, order, nm_id, date_from, date_to)
        skip = 0
        while True:
            if skip > FEEDBACKS_MAX_SKIP:
                raise self._refuse(FEEDBACKS, "more than 200,000 feedbacks match: narrow with date_from/date_to")
            response = self._get(FEEDBACKS, _FeedbacksResponse, params={**params, "take": take, "skip": skip})
            if response.error:  # not an empty inbox: WB says the listing failed
                raise self._answered_error(FEEDBACKS, response.errorText)
            page = response.data.feedbacks if response.data else []
            if page:
                yield page
            if len(page) < take:
                return
            skip += take

    def feedback(self, feedback_id: str) -> Feedback | None:
        """The feedback, or None when WB has none with that id (its documented 422)."""
        return self._item(FEEDBACK, _FeedbackResponse, feedback_id)

    def answer_feedback(self, feedback_id: str, text: str) -> None:
        """Answer a feedback. After a failure WB may have acted on, the feedback is read back: an
        answer with this text means done; otherwise the answer is sent again."""
        self._check_answer(ANSWER_FEEDBACK, feedback_id, text)

        def answered() -> bool:
            fb = self.feedback(feedback_id)
            return fb is not None and fb.answer is not None and fb.answer.text == text

        self._t.call(ANSWER_FEEDBACK, json_body={"id": feedback_id, "text": text}, verify=answered)

    def iter_questions(
        self,
        *,
        is_answered: bool,
        take: int = 1000,
        order: str = "dateAsc",
        nm_id: int | None = None,
        date_from: datetime | None = None,
        date_to: datetime | None = None,
    ) -> Iterator[list[Question]]:
        """Questions (answered or not), page by page; WB serves at most 10,000 by skip/take."""
        if not 1 <= take <= QUESTIONS_MAX_SKIP_TAKE:
            raise self._refuse(QUESTIONS, f"take must be 1..{QUESTIONS_MAX_SKIP_TAKE}, got {take}")
        params = self._comm_params(is_answered, order, nm_id, date_from, date_to)
        skip = 0
        while True:
            if skip + take > QUESTIONS_MAX_SKIP_TAKE:
                raise self._refuse(QUESTIONS, "more than 10,000 questions match: narrow with date_from/date_to")
            response = self._get(QUESTIONS, _QuestionsResponse, params={**params, "take": take, "skip": skip})
            if response.error:
                raise self._answered_error(QUESTIONS, response.errorText)
            page = response.data.questions if response.data else []
            if page:
                yield page
            if len(page) < take:
                return
            skip += take

    def question(self, question_id: str) -> Question | None:
        """The question, or None when WB has none with that id (its documented 422)."""
        return self._item(QUESTION, _QuestionResponse, question_id)

    def _item(self, endpoint: Endpoint, model: type[_FeedbackResponse | _QuestionResponse], item_id: str) -> Any:
        """One feedback or question by id. WB answers an id it does not know with HTTP 422
        (``errorText`` "Невозможно получить отзыв по id"): None, as an answer of ``data: null`` is."""
        try:
            return self._get(endpoint, model, params={"id": item_id}).data
        except WbRequestError as exc:
            if exc.status == 422:
                return None
            raise

    def answer_question(self, question_id: str, text: str) -> None:
        """Answer a question (``PATCH /api/v1/questions``, state wbRu); checked like answer_feedback."""
        self._check_answer(ANSWER_QUESTION, question_id, text)

        def answered() -> bool:
            q = self.question(question_id)
            return q is not None and q.answer is not None and q.answer.text == text

        body = {"id": question_id, "answer": {"text": text}, "state": "wbRu"}
        response = self._t.call(ANSWER_QUESTION, json_body=body, verify=answered)
        if response is not None and response.content:
            envelope = self._t.decode(ANSWER_QUESTION, response, _EnvelopeResponse)
            if envelope.error:
                raise self._answered_error(ANSWER_QUESTION, envelope.errorText)

    def _check_answer(self, endpoint: Endpoint, item_id: str, text: str) -> None:
        if not item_id:
            raise self._refuse(endpoint, "the id is empty")
        low, high = ANSWER_TEXT
        if not low <= len(text.strip()) <= high:
            raise self._refuse(endpoint, f"an answer has {low}..{high} characters, got {len(text.strip())}")

    @staticmethod
    def _comm_params(
        is_answered: bool, order: str, nm_id: int | None, date_from: datetime | None, date_to: datetime | None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"isAnswered": "true" if is_answered else "false", "order": order}
        if nm_id is not None:
            params["nmId"] = nm_id
        if date_from is not None:
            params["dateFrom"] = int(date_from.timestamp())
        if date_to is not None:
            params["dateTo"] = int(date_to.timestamp())
        return params

    # --- common: slots, news, ping ---------------------------------------------------------------

    def acceptance_coefficients(self, warehouse_ids: Iterable[int] | None = None) -> list[AcceptanceCoefficient]:
        """Acceptance coefficients for the next 14 days, for every warehouse or the ones given."""
        params = {"warehouseIDs": ",".join(map(str, warehouse_ids))} if warehouse_ids is not None else None
        return self._get(ACCEPTANCE, list[AcceptanceCoefficient], params=params, empty=[])

    def iter_news(self, from_id: int | None = None, from_date: date | None = None) -> Iterator[Page[News]]:
        """WB news from an id (inclusive) or a date, ≤ 100 a page; the next page starts after the
        highest id seen."""
        if (from_id is None) == (from_date is None):
            raise self._refuse(NEWS, "give exactly one of from_id or from_date")
        params: dict[str, Any] = {"fromID": from_id} if from_id is not None else {"from": from_date.isoformat()}  # type: ignore[union-attr]
        while True:
            response, screening = self._rows(NEWS, _NewsResponse, params=params)
            page = Page(response.data, screening)
            if page or screening:
                yield page
            if len(page) + len(screening.refused) < NEWS_MAX_ITEMS or not page:
                return
            params = {"fromID": max(n.id for n in page) + 1}

    def ping(self, category: str) -> Ping:
        """``GET /ping`` of one category: WB reachable and the token valid for it (3 per 30 s)."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown WB category {category!r}: expected one of {', '.join(CATEGORIES)}")
        return self._get(Endpoint("GET", category, "/ping", ping_group(category)), Ping)
