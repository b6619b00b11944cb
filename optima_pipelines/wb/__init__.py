"""The WB seller API client: typed rows, paging, a shared and persisted rate limiter, bounded
retries, deferral instead of long sleeps, strict validation, and a token that never leaks.

No Dagster here: ``optima_pipelines.resources.wb.WbApi`` wraps it for assets.

    from optima_pipelines.wb import WbClient, WbConfig, RateLimiter, PostgresLimiterStore

    config = WbConfig.from_env()   # OPTIMA_WB_BASE_URL → every category at {base}/{category};
                                   # unset → WB's real hosts. OPTIMA_WB_TIME_SCALE for a fast simulator.
    limiter = RateLimiter(PostgresLimiterStore(warehouse.connect))   # or RateLimiter(): in-process
    with WbClient(cabinet_id, token, config=config, limiter=limiter, token_type="personal") as client:
        for page in client.iter_orders(since, flag=0):   # one list[Order] per WB page
            load(page)                                   # e.g. sync.digitization.load_feed

The models (``Order``, ``Campaign``, ...) are WB's wire schema, one module of ``wb/models/`` per
WB API section; import them from here.

Methods (every iterator yields one list per WB page; lists are complete or an exception is raised).
Rows are judged one by one (``wb.screening``): a page (a ``Page``) holds the rows that passed, and
its ``screening`` the rows refused for a bad value and those flagged as from the future (a load
records them with ``FeedLoad.screen``); only an answer broken outside its rows fails the page.

- statistics: ``iter_orders(date_from, *, flag=0) -> Iterator[list[Order]]``,
  ``iter_sales(date_from, *, flag=0) -> Iterator[list[Sale]]`` (flag 0: changed since, to the end,
  each row once; flag 1: the day of ``date_from``, one request)
- finance: ``iter_report_lines(date_from, date_to, *, period="daily", limit=100000, after_rrd_id=0) ->
  Iterator[list[ReportLine]]``
- advertising: ``campaign_refs() -> list[CampaignRef]``,
  ``list_campaigns(ids=None, *, statuses=None, payment_type=None) -> list[Campaign]``,
  ``iter_fullstats(advert_ids, begin, end) -> Iterator[list[AdStat]]`` and
  ``fullstats(advert_ids, begin, end) -> list[AdStat]`` (split into ≤ 50 ids × ≤ 31 days),
  ``set_bids(bids: Sequence[BidUpdate]) -> list[BidUpdate]``,
  ``min_bids(advert_id, nm_ids, *, payment_type="cpm", placement_types=(...)) -> dict[int, list[MinBid]]``
- analytics: ``funnel_products(begin, end, *, nm_ids=None, past=None) -> list[FunnelProduct]``,
  ``iter_stocks(nm_ids=None, chrt_ids=None) -> Iterator[list[Stock]]``
- content: ``iter_cards(*, cursor=None, limit=100) -> Iterator[CardsPage]`` (``page.cursor`` resumes)
- prices: ``iter_prices() -> Iterator[list[Price]]``, ``upload_prices(items: Sequence[PriceUpdate]) -> int``
  (task id), ``price_task(task_id) -> PriceTaskResult``,
  ``wait_price_task(task_id, *, timeout=60) -> PriceTaskResult`` (``.done``, ``.items[i].status``);
  WB's HTTP 200 with ``error: true`` (a failed task, a refused answer) raises ``WbRequestError``
  with ``status`` 200 and WB's ``errorText``
- feedbacks: ``iter_feedbacks(*, is_answered, ...) -> Iterator[list[Feedback]]``, ``feedback(id)``,
  ``answer_feedback(id, text)``, ``iter_questions(*, is_answered, ...)``, ``question(id)``,
  ``answer_question(id, text)``
- common: ``acceptance_coefficients(warehouse_ids=None) -> list[AcceptanceCoefficient]``,
  ``iter_news(from_id=None, from_date=None) -> Iterator[list[News]]``, ``ping(category) -> Ping``
- ``close()``, and ``with WbClient(...) as client``.

Errors (all ``WbError``; each names the cabinet and the endpoint, never the token; ``is_transient``
says whether a job should retry): ``WbAuthError`` (401/403, never retried), ``WbResponseError``
(malformed answer: names the endpoint and the field path), ``WbRequestError`` (WB refused the
request, with WB's detail), ``WbUnavailable`` (5xx/429/network after bounded retries; transient),
``WbDeferred`` (the limiter would wait longer than ``config.max_wait_seconds``: raised before
sending; ``resume_at`` says when to come back; transient).

The limiter: ``RateLimiter(store)`` with ``MemoryLimiterStore`` (process-wide by default) or
``PostgresLimiterStore(connect)`` (table ``wb_rate_limits``: shared by processes and runs);
``limiter.wait_time(cabinet_id, group) -> float``; WB's limit rows per group and token type are in
``optima_pipelines.wb.limits``.
"""

from optima_pipelines.wb.client import WbClient
from optima_pipelines.wb.config import CATEGORIES, WB_HOSTS, WbConfig
from optima_pipelines.wb.errors import (
    WbAuthError,
    WbDeferred,
    WbError,
    WbRequestError,
    WbResponseError,
    WbUnavailable,
)
from optima_pipelines.wb.http import token_problem, token_type_of
from optima_pipelines.wb.limiter import LimiterStore, MemoryLimiterStore, PostgresLimiterStore, RateLimiter
from optima_pipelines.wb.limits import LIMIT_GROUPS, LimitRule, rule_for
from optima_pipelines.wb.models.advertising import AdStat, BidUpdate, Campaign, CampaignProduct, CampaignRef, MinBid
from optima_pipelines.wb.models.analytics import FunnelDay, FunnelProduct, Stock
from optima_pipelines.wb.models.common import AcceptanceCoefficient, News, Ping
from optima_pipelines.wb.models.content import Card, CardsCursor, CardsPage
from optima_pipelines.wb.models.feedbacks import Feedback, Question
from optima_pipelines.wb.models.finance import ReportLine
from optima_pipelines.wb.models.prices import Price, PriceTaskItem, PriceTaskResult, PriceUpdate
from optima_pipelines.wb.models.statistics import Order, Sale
from optima_pipelines.wb.screening import Page, Screening, Verdict

__all__ = [
    "CATEGORIES",
    "LIMIT_GROUPS",
    "WB_HOSTS",
    "AcceptanceCoefficient",
    "AdStat",
    "BidUpdate",
    "Campaign",
    "CampaignProduct",
    "CampaignRef",
    "Card",
    "CardsCursor",
    "CardsPage",
    "Feedback",
    "FunnelDay",
    "FunnelProduct",
    "LimitRule",
    "LimiterStore",
    "MemoryLimiterStore",
    "MinBid",
    "News",
    "Order",
    "Page",
    "Ping",
    "PostgresLimiterStore",
    "Price",
    "PriceTaskItem",
    "PriceTaskResult",
    "PriceUpdate",
    "Question",
    "RateLimiter",
    "ReportLine",
    "Sale",
    "Screening",
    "Stock",
    "Verdict",
    "WbAuthError",
    "WbClient",
    "WbConfig",
    "WbDeferred",
    "WbError",
    "WbRequestError",
    "WbResponseError",
    "WbUnavailable",
    "rule_for",
    "token_problem",
    "token_type_of",
]
