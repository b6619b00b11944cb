"""The WB client against the WB simulator over real HTTP (and PostgreSQL for the shared limiter).

Every request any test here sends is validated against WB's own OpenAPI files (openapi-core) when
the test ends: the client speaks WB's contract, not just the simulator's.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import msgspec
import pytest

from optima_pipelines.db.connection import connect
from optima_pipelines.wb import (
    BidUpdate,
    MemoryLimiterStore,
    Order,
    PostgresLimiterStore,
    PriceUpdate,
    RateLimiter,
    Sale,
    WbAuthError,
    WbClient,
    WbConfig,
    WbDeferred,
    WbRequestError,
    WbResponseError,
    WbUnavailable,
)
from optima_pipelines.wb import client as wb_client_module
from wb_simulator import CabinetSpec, Simulator, serve
from wb_simulator.contract import Contract
from wb_simulator.faults import ENVELOPE_ERROR_TEXT

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

SCALE = 600.0  # the simulator's clock, and the client's limits, run 600x faster: 1/min → every 0.1 s
NOW = datetime(2026, 8, 20, 12, 0)  # Moscow
TODAY = NOW.date()


@pytest.fixture(scope="module")
def sim() -> Simulator:
    return Simulator(
        seed=11,
        cabinets=[
            # ~2,300 orders a day over 90 days: the 200k-order feed, paged by WB's ~80k cap.
            CabinetSpec(id="big", products=200, orders_per_day=2300, history_days=90),
            CabinetSpec(id="c2", products=30, orders_per_day=100, history_days=40, campaigns=6),
        ],
        time_scale=SCALE,
        now=NOW,
    )


@pytest.fixture(scope="module")
def base_url(sim: Simulator) -> Iterator[str]:
    with serve(sim) as url:
        yield url


@pytest.fixture(scope="module")
def big_orders(sim: Simulator) -> list[Order]:
    """The simulator's own orders feed of "big" (the clock is pinned: it does not change), typed."""
    return msgspec.json.decode(msgspec.json.encode(sim.truth.orders("big")), type=list[Order])


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


@pytest.fixture(autouse=True)
def _fresh_gateway(sim: Simulator) -> Iterator[None]:
    sim.faults.clear()
    sim.limiter.clear()
    yield
    sim.faults.clear()
    sim.limiter.clear()


class Recorder:
    """What the client sent and what came back, from httpx's event hooks."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.statuses: list[int] = []
        #: Extra response hooks a test adds after the client exists (httpx copies its hook lists).
        self.on_response: list[Callable[[httpx.Response], None]] = []
        self.hooks: dict[str, list[Callable[..., Any]]] = {
            "request": [self.requests.append],
            "response": [self._response],
        }

    def _response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)
        for hook in self.on_response:
            hook(response)

    def sent(self, method: str, path_end: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path.endswith(path_end)]


def _config(base_url: str, **overrides: Any) -> WbConfig:
    settings: dict[str, Any] = {
        "time_scale": SCALE,
        "backoff_base_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "write_settle_seconds": 0.2,
        **overrides,
    }
    return WbConfig.for_base_url(base_url, **settings)


@pytest.fixture
def make_client(
    sim: Simulator, base_url: str, contract: Contract
) -> Iterator[Callable[..., tuple[WbClient, Recorder]]]:
    made: list[tuple[WbClient, Recorder]] = []

    def make(
        cabinet: str = "c2",
        token: str | None = None,
        *,
        limiter: RateLimiter | None = None,
        token_type: str = "personal",
        **config: Any,
    ) -> tuple[WbClient, Recorder]:
        recorder = Recorder()
        client = WbClient(
            cabinet,
            token if token is not None else sim.token(cabinet),
            config=_config(config.pop("base_url", base_url), **config),
            limiter=limiter or RateLimiter(MemoryLimiterStore()),
            token_type=token_type,
            event_hooks=recorder.hooks,
        )
        made.append((client, recorder))
        return client, recorder

    yield make
    for client, recorder in made:
        client.close()
        for request in recorder.requests:
            contract.validate_request(request)


def _all(pages: Iterator[list[Any]]) -> list[Any]:
    return [row for page in pages for row in page]


# --- paging --------------------------------------------------------------------------------------


def test_200k_orders_page_out_to_exactly_the_simulators_feed(sim: Simulator, make_client, big_orders):
    client, recorder = make_client("big")
    pages = list(client.iter_orders(TODAY - timedelta(days=100)))
    assert len(big_orders) > 190_000
    assert len(pages) >= 3  # WB answers ~80k rows a request
    rows = [r for page in pages for r in page]
    # Each order once (WB repeats the boundary rows on the next page), in feed order, field for field.
    assert [r.srid for r in rows] == [o.srid for o in big_orders]
    assert rows == big_orders
    # One more request than pages: WB's empty answer (or the repeated boundary alone) ends the feed.
    assert len(recorder.sent("GET", "/api/v1/supplier/orders")) == len(pages) + 1

    sales = _all(client.iter_sales(TODAY - timedelta(days=100)))
    assert sales == msgspec.json.decode(msgspec.json.encode(sim.truth.sales("big")), type=list[Sale])
    assert any(s.is_return for s in sales) and any(not s.is_return for s in sales)


def test_flag_1_is_one_request_for_one_day(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    day = TODAY - timedelta(days=3)
    rows = _all(client.iter_orders(day, flag=1))
    assert [r.srid for r in rows] == [t["srid"] for t in sim.truth.orders("c2", day)]
    assert rows and {r.day for r in rows} == {day}
    assert len(recorder.requests) == 1


def test_the_finance_report_pages_along_rrd_id_with_money_as_decimals(sim: Simulator, make_client):
    client, _ = make_client("c2")
    begin, end = TODAY - timedelta(days=20), TODAY - timedelta(days=1)
    pages = list(client.iter_report_lines(begin, end, limit=1000))
    lines = [line for page in pages for line in page]
    truth = sim.truth.report_lines("c2", begin, end)
    assert len(pages) >= 3
    assert [line.rrd_id for line in lines] == [t["rrdId"] for t in truth]
    assert sum(line.for_pay for line in lines) == sum(Decimal(t["forPay"]) for t in truth)
    assert all(isinstance(line.for_pay, Decimal) for line in lines)
    # A run that stored the first page (then was deferred) resumes right after it.
    rest = _all(client.iter_report_lines(begin, end, limit=1000, after_rrd_id=pages[0][-1].rrd_id))
    assert pages[0] + rest == lines


# --- a storm of 5xx and 429 --------------------------------------------------------------------------


def test_a_storm_of_5xx_and_429_still_ends_with_the_complete_identical_data(sim: Simulator, make_client, big_orders):
    begin, end = TODAY - timedelta(days=4), TODAY - timedelta(days=2)
    calm, _ = make_client("big")
    calm_lines = _all(calm.iter_report_lines(begin, end, limit=1000))
    calm_cards = _all(calm.iter_cards(limit=10))

    for category in ("statistics", "finance", "content"):
        sim.faults.set(f"{category}/*", error_rate=0.2, rate_429=0.1)
    # 30 % of answers fail, on top of WB's own 429s: 20 attempts a request keep the odds of one of
    # the hundreds of requests failing every time negligible (10 ran out once in CI).
    stormy, recorder = make_client("big", max_attempts=20)
    orders = _all(stormy.iter_orders(TODAY - timedelta(days=100)))
    lines = _all(stormy.iter_report_lines(begin, end, limit=1000))
    cards = _all(stormy.iter_cards(limit=10))

    assert sum(1 for s in recorder.statuses if s >= 500) >= 5
    assert sum(1 for s in recorder.statuses if s == 429) >= 3
    assert orders == big_orders
    assert lines == calm_lines and len(lines) > 5000
    assert cards == calm_cards and len(cards) == 200


# --- the limiter across processes, and deferral ------------------------------------------------------

_OTHER_PROCESS = textwrap.dedent(
    """
    import json, sys
    from datetime import date
    from optima_pipelines.db.connection import connect
    from optima_pipelines.wb import PostgresLimiterStore, RateLimiter, WbClient, WbConfig, WbDeferred

    base_url, token, db_url, schema, day = sys.argv[1:6]
    config = WbConfig.for_base_url(base_url, time_scale=600, max_wait_seconds=0.5)
    limiter = RateLimiter(PostgresLimiterStore(lambda: connect(db_url, schema)))
    sent = []
    with WbClient("c2", token, config=config, limiter=limiter,
                  event_hooks={"request": [sent.append]}) as client:
        try:
            list(client.iter_orders(date.fromisoformat(day), flag=1))
            print(json.dumps({"deferred": None, "requests": len(sent)}))
        except WbDeferred as exc:
            print(json.dumps({"deferred": exc.resume_at.isoformat(), "reason": exc.reason, "requests": len(sent)}))
    """
)


def test_a_pause_learned_in_one_process_is_honoured_by_the_next(
    sim: Simulator, base_url: str, make_client, optima_env: str, database_url: str
):
    schema = f"optima_{optima_env}"
    token = sim.token("c2")
    day = (TODAY - timedelta(days=2)).isoformat()
    # WB's 100 minutes: 10 real seconds here, longer than process 1 takes to start on a loaded
    # machine (2 real seconds ran out before its first request once).
    sim.penalize("c2", "statistics.orders", 6000)

    # Process 1 meets the 429, learns the pause (X-Ratelimit-Retry) and defers instead of sleeping.
    done = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, base_url, token, database_url, schema, day],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first = json.loads(done.stdout)
    assert first["requests"] == 1 and first["deferred"] is not None
    assert "429" in first["reason"] and token not in done.stdout + done.stderr

    # Process 2 (this one, a new limiter over the same table) defers without sending anything.
    limiter = RateLimiter(PostgresLimiterStore(lambda: connect(database_url, schema)))
    client, recorder = make_client("c2", token, limiter=limiter, max_wait_seconds=0.5)
    with pytest.raises(WbDeferred) as caught:
        list(client.iter_orders(date.fromisoformat(day), flag=1))
    assert recorder.requests == []
    assert caught.value.resume_at == datetime.fromisoformat(first["deferred"])

    # Once the pause is over, the same limiter lets the request go and WB answers.
    deadline = time.monotonic() + 60
    while limiter.wait_time("c2", "statistics.orders") > 0.5:
        assert time.monotonic() < deadline, "the learned pause never ended"
        time.sleep(0.1)
    assert len(_all(client.iter_orders(date.fromisoformat(day), flag=1))) == len(
        sim.truth.orders("c2", date.fromisoformat(day))
    )


def test_a_long_rate_limit_wait_defers_before_sending(make_client):
    # WB's real limits (time_scale 1): sales allow one request a minute, no burst.
    client, recorder = make_client("c2", time_scale=1.0)
    list(client.iter_sales(TODAY - timedelta(days=1), flag=1))
    before = datetime.now().astimezone()
    with pytest.raises(WbDeferred) as caught:
        list(client.iter_sales(TODAY - timedelta(days=2), flag=1))
    assert len(recorder.requests) == 1
    err = caught.value
    assert err.group == "statistics.sales" and err.is_transient
    assert 55 <= (err.resume_at - before).total_seconds() <= 61
    assert "1 request(s) per 1 min" in str(err) and "'c2'" in str(err)


# --- malformed answers -------------------------------------------------------------------------------


def test_a_truncated_page_fails_loudly_and_keeps_only_complete_pages(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    pages = client.iter_report_lines(TODAY - timedelta(days=20), TODAY - timedelta(days=1), limit=500)
    first = next(pages)
    sim.faults.set("POST finance/api/finance/v1/sales-reports/detailed", truncate=True)
    with pytest.raises(WbResponseError) as caught:
        next(pages)
    assert "POST finance /api/finance/v1/sales-reports/detailed" in str(caught.value)
    assert "invalid JSON" in str(caught.value) and "'c2'" in str(caught.value)
    assert len(first) == 500
    assert len(recorder.requests) == 2  # not retried: a malformed answer is not a passing glitch


def test_a_row_of_wrong_types_is_refused_alone_naming_the_endpoint_and_the_field(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    day = TODAY - timedelta(days=3)
    truth = [o["srid"] for o in sim.truth.orders("c2", day)]
    sim.faults.set("GET statistics/api/v1/supplier/orders", wrong_types=True)
    (page,) = list(client.iter_orders(day, flag=1))
    assert sorted(o.srid for o in page) == sorted(truth[1:])  # the page's other rows decode
    (refused,) = page.screening.refused
    assert refused.endpoint == "GET statistics /api/v1/supplier/orders" and refused.outcome == "refused"
    assert refused.field is not None and refused.reason.startswith(f"{refused.field}: Expected `")
    assert f'"srid":{len(truth[0])}' in refused.raw  # WB's row as sent: its srid a number
    assert len(recorder.requests) == 1


def test_a_wrong_type_outside_the_rows_fails_the_page_naming_the_endpoint_and_the_field(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    sim.faults.set("GET prices/api/v2/list/goods/filter", wrong_types=True)
    with pytest.raises(WbResponseError) as caught:
        _all(client.iter_prices())
    err = caught.value
    assert err.field == "$.errorText"
    assert f"at {err.field}" in str(err) and "GET prices /api/v2/list/goods/filter" in str(err)
    assert len(recorder.requests) == 1


def test_a_204_where_rows_were_expected_is_an_error_not_an_empty_feed(sim: Simulator, make_client):
    client, _ = make_client("c2")
    sim.faults.set("GET statistics/api/v1/supplier/sales", empty_204=True)
    with pytest.raises(WbResponseError, match="HTTP 204 with no content where data was expected"):
        _all(client.iter_sales(TODAY - timedelta(days=30)))


def test_a_malformed_chunk_fails_the_whole_split_call(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    ids = [c.advert_id for c in client.campaign_refs()]
    sim.faults.set("GET advert/adv/v3/fullstats", malformed=True, times=1)
    with pytest.raises(WbResponseError, match="GET advert /adv/v3/fullstats"):
        client.fullstats(ids, TODAY - timedelta(days=40), TODAY - timedelta(days=1))
    assert len(recorder.sent("GET", "/adv/v3/fullstats")) == 1


# --- bad tokens --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["expired", "revoked", "wrong_category", "forged"])
def test_a_bad_token_fails_at_once_and_never_leaks(kind: str, sim: Simulator, make_client, caplog):
    caplog.set_level(logging.DEBUG)
    if kind == "expired":
        token = sim.token("c2", expired=True)
    elif kind == "revoked":
        token = sim.token("c2")
        sim.revoke(token)
    elif kind == "wrong_category":
        token = sim.token("c2", categories=["advert"])
    else:
        header, payload, signature = sim.token("c2").split(".")
        token = f"{header}.{payload}.{signature[::-1]}"
    client, recorder = make_client("c2", token)
    with pytest.raises(WbAuthError) as caught:
        _all(client.iter_orders(TODAY - timedelta(days=3), flag=1))
    err = caught.value
    assert len(recorder.requests) == 1  # never retried
    assert err.status == 401 and not err.is_transient
    assert "'c2'" in str(err) and "GET statistics /api/v1/supplier/orders" in str(err)
    everything = "\n".join(
        [
            str(err),
            repr(err),
            "".join(traceback.format_exception(err)),
            caplog.text,
            repr(client),
            repr(client.limiter),
            repr(client.config),
        ]
    )
    assert token not in everything
    assert token.split(".")[2] not in everything


def test_a_base_token_gets_wbs_base_limits_and_methods(sim: Simulator, make_client):
    # "auto" reads the token type from the JWT (acc=1: Base), which selects WB's Base rows.
    client, recorder = make_client("c2", sim.token("c2", token_type="base"), token_type="auto", time_scale=1.0)
    assert client.token_type == "base"
    with pytest.raises(WbRequestError, match="does not allow a base token"):
        _all(client.iter_stocks())
    assert recorder.requests == []
    _all(client.iter_orders(TODAY - timedelta(days=1), flag=1))
    with pytest.raises(WbDeferred) as caught:  # a Base token may ask for orders once in 3 hours
        _all(client.iter_orders(TODAY - timedelta(days=2), flag=1))
    assert "1 request(s) per 3 h" in str(caught.value) and len(recorder.requests) == 1


def test_a_token_that_cannot_be_a_header_is_refused_before_sending(make_client):
    with pytest.raises(WbAuthError, match="not a WB API token") as caught:
        make_client("c2", "eyJ secret\nX-Injected: 1")
    assert "secret" not in str(caught.value)


# --- splitting -------------------------------------------------------------------------------------


def test_fullstats_is_split_into_50_ids_and_31_days_and_loses_nothing(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    real = [c.advert_id for c in client.campaign_refs()]
    ids = real + list(range(1, 61))  # 66 ids: WB ignores unknown ones
    begin, end = TODAY - timedelta(days=70), TODAY - timedelta(days=1)
    rows = client.fullstats(ids, begin, end)

    requests = recorder.sent("GET", "/adv/v3/fullstats")
    assert len(requests) == 2 * 3  # 66 ids → 2 chunks; 70 days → 31 + 31 + 8
    seen = set()
    for r in requests:
        chunk = r.url.params["ids"].split(",")
        first, last = date.fromisoformat(r.url.params["beginDate"]), date.fromisoformat(r.url.params["endDate"])
        assert len(chunk) <= 50 and (last - first).days + 1 <= 31
        seen.update((int(i), first + timedelta(days=d)) for i in chunk for d in range((last - first).days + 1))
    assert seen == {(i, begin + timedelta(days=d)) for i in ids for d in range((end - begin).days + 1)}

    expected = set()
    for d in range((end - begin).days + 1):
        day = begin + timedelta(days=d)
        for advert_id, stats in sim.truth.ad_stats("c2", day).items():
            for app in stats["apps"]:
                for nm in app["nms"]:
                    expected.add(
                        (advert_id, day, app["appType"], nm["nmId"], nm["views"], nm["clicks"], str(nm["sum"]))
                    )
    got = {(r.advert_id, r.day, r.app_type, r.nm_id, r.views, r.clicks, str(r.sum)) for r in rows}
    assert got == expected and len(rows) == len(expected) > 100


# --- writes ------------------------------------------------------------------------------------------


def _a_bid(client: WbClient) -> BidUpdate:
    campaign = next(c for c in client.list_campaigns() if c.status in (4, 9, 11) and c.products)
    nm = campaign.products[0].nm_id
    floor = max(b.value for b in client.min_bids(campaign.id, [nm], payment_type=campaign.settings.payment_type)[nm])
    placement = "combined" if campaign.bid_type == "unified" else "search"
    current = campaign.products[0].bids_kopecks.search
    return BidUpdate(advert_id=campaign.id, nm_id=nm, bid_kopecks=max(floor, current) + 137, placement=placement)


def _bid_in_truth(sim: Simulator, bid: BidUpdate) -> int:
    campaign = next(c for c in sim.truth.campaigns("c2") if c["id"] == bid.advert_id)
    return next(n["bids_kopecks"]["search"] for n in campaign["nm_settings"] if n["nm_id"] == bid.nm_id)


def test_a_write_that_failed_before_wb_acted_is_checked_then_resent(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    bid = _a_bid(client)
    writes_before = len(sim.writes)
    sim.faults.set("PATCH advert/api/advert/v1/bids", error_rate=1.0, times=1)
    assert client.set_bids([bid]) == [bid]
    methods = [(r.method, r.url.path.rsplit("/", 1)[-1]) for r in recorder.requests[-3:]]
    assert methods == [("PATCH", "bids"), ("GET", "adverts"), ("PATCH", "bids")]
    assert [w.kind for w in sim.writes[writes_before:]] == ["bids"]
    assert _bid_in_truth(sim, bid) == bid.bid_kopecks


def test_a_write_wb_acted_on_but_never_answered_is_not_sent_again(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    bid = _a_bid(client)
    writes_before = len(sim.writes)

    def lose_the_answer(response: httpx.Response) -> None:
        # WB applied the bid; its answer never reaches us (the connection dropped on the way back).
        if response.request.method == "PATCH" and len(recorder.sent("PATCH", "/api/advert/v1/bids")) == 1:
            raise httpx.ReadError("connection reset while reading the answer", request=response.request)

    recorder.on_response.append(lose_the_answer)
    assert client.set_bids([bid]) == [bid]
    methods = [(r.method, r.url.path.rsplit("/", 1)[-1]) for r in recorder.requests[-2:]]
    assert methods == [("PATCH", "bids"), ("GET", "adverts")]  # checked, found in place, not resent
    assert [w.kind for w in sim.writes[writes_before:]] == ["bids"]
    assert _bid_in_truth(sim, bid) == bid.bid_kopecks


def test_a_price_task_is_resent_as_is_and_wb_deduplicates_it(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    price = _all(client.iter_prices())[3]
    items = [PriceUpdate(nm_id=price.nm_id, price=int(price.price) + 50, discount=price.discount)]
    writes_before = len(sim.writes)
    sim.faults.set("POST prices/api/v2/upload/task", error_rate=1.0, times=1)
    task_id = client.upload_prices(items)
    assert len(recorder.sent("POST", "/api/v2/upload/task")) == 2
    assert client.upload_prices(items) == task_id  # identical task: WB's 208 with the same id
    assert [w.kind for w in sim.writes[writes_before:]] == ["price_task"]
    result = client.wait_price_task(task_id, timeout=10)
    assert result.done and [(i.nm_id, i.ok) for i in result.items] == [(price.nm_id, True)]


def test_a_price_task_wb_reports_failed_is_an_error_at_once_with_wbs_text(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    price = _all(client.iter_prices())[4]
    task_id = client.upload_prices([PriceUpdate(nm_id=price.nm_id, price=int(price.price) + 70)])
    sim.faults.set("GET prices/api/v2/history/tasks", envelope_error=True)  # {"data": null, "error": true}
    with pytest.raises(WbRequestError) as caught:
        client.wait_price_task(task_id, timeout=30)
    assert ENVELOPE_ERROR_TEXT in str(caught.value) and "HTTP 200" in str(caught.value)
    assert len(recorder.sent("GET", "/api/v2/history/tasks")) == 1  # no polling of a task WB says failed


def test_an_answer_wb_refuses_with_http_200_says_it_was_sent_and_answered(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    question = _all(client.iter_questions(is_answered=False))[1]
    sim.faults.set("PATCH feedbacks/api/v1/questions", envelope_error=True, times=1)
    with pytest.raises(WbRequestError) as caught:
        client.answer_question(question.id, "Да, этот размер маломерит.")
    message = str(caught.value)
    assert "not sent" not in message
    assert "HTTP 200" in message and "error: true" in message and ENVELOPE_ERROR_TEXT in message
    assert caught.value.status == 200 and not caught.value.is_transient
    assert len(recorder.sent("PATCH", "/api/v1/questions")) == 1


@pytest.mark.parametrize("path", ["/api/v1/feedbacks", "/api/v1/questions"])
def test_a_listing_wb_answers_with_error_true_is_an_error_not_an_empty_inbox(sim: Simulator, make_client, path: str):
    """An empty listing would tell the auto-replies that every open item was answered elsewhere."""
    client, _ = make_client("c2")
    sim.faults.set(f"GET feedbacks{path}", envelope_error=True)
    listing = client.iter_feedbacks if path.endswith("feedbacks") else client.iter_questions
    with pytest.raises(WbRequestError, match=ENVELOPE_ERROR_TEXT):
        _all(listing(is_answered=False))


def test_an_unknown_feedback_or_question_id_is_wbs_documented_422_and_none(
    sim: Simulator, make_client, contract: Contract
):
    client, recorder = make_client("c2")
    answers: list[httpx.Response] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        answers.append(response)

    recorder.on_response.append(keep)
    assert client.feedback("no-such-feedback") is None
    assert client.question("no-such-question") is None
    assert [r.status_code for r in answers] == [422, 422]  # answered once each: not retried
    for response in answers:
        contract.validate_response(response)  # WB's body, as its OpenAPI documents it
    assert [r.json()["errorText"] for r in answers] == [
        "Невозможно получить отзыв по id",
        "Невозможно получить вопрос по id",
    ]
    known = _all(client.iter_feedbacks(is_answered=False))[0]
    assert client.feedback(known.id) == known


def test_an_answer_whose_fate_cannot_be_checked_is_not_sent_twice(sim: Simulator, make_client):
    client, recorder = make_client("c2")
    feedback = _all(client.iter_feedbacks(is_answered=False, take=50))[0]
    sim.faults.set("POST feedbacks/api/v1/feedbacks/answer", error_rate=1.0, times=1)
    # ... and the read that would tell whether it took effect fails too.
    sim.faults.set("GET feedbacks/api/v1/feedback", error_rate=1.0)
    with pytest.raises(WbUnavailable) as caught:
        client.answer_feedback(feedback.id, "Спасибо за отзыв!")
    assert caught.value.outcome_unknown and caught.value.is_transient
    assert "may or may not have been applied" in str(caught.value)
    assert len(recorder.sent("POST", "/api/v1/feedbacks/answer")) == 1


def test_a_write_that_never_reached_wb_is_retried_within_bounds(make_client):
    with socket_closed() as url:
        client, _ = make_client("c2", "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl", base_url=url, max_attempts=3)
        with pytest.raises(WbUnavailable) as caught:
            client.upload_prices([PriceUpdate(nm_id=1, price=100)])
    assert caught.value.attempts == 3 and not caught.value.outcome_unknown
    assert "cannot connect" in str(caught.value)


class socket_closed:
    """A localhost URL where nothing listens."""

    def __enter__(self) -> str:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        pass


# --- the contract ----------------------------------------------------------------------------------


def test_every_method_speaks_wbs_contract(sim: Simulator, make_client, contract: Contract):
    client, recorder = make_client("c2")
    week = (TODAY - timedelta(days=7), TODAY - timedelta(days=1))
    assert _all(client.iter_orders(TODAY - timedelta(days=2)))
    assert _all(client.iter_sales(TODAY - timedelta(days=2)))
    assert _all(client.iter_report_lines(*week))
    refs = client.campaign_refs()
    assert client.list_campaigns([r.advert_id for r in refs], statuses=[4, 7, 9, 11])
    assert client.fullstats([r.advert_id for r in refs], *week)
    bid = _a_bid(client)
    assert client.set_bids([bid]) == [bid]
    assert client.min_bids(bid.advert_id, [bid.nm_id])
    assert client.funnel_products(*week, past=(week[0] - timedelta(days=7), week[1] - timedelta(days=7)))
    assert _all(client.iter_stocks())
    assert _all(client.iter_cards(limit=100))
    prices = _all(client.iter_prices())
    task = client.upload_prices([PriceUpdate(nm_id=prices[0].nm_id, price=int(prices[0].price) + 1)])
    assert client.wait_price_task(task, timeout=10).done
    feedback = _all(client.iter_feedbacks(is_answered=False))[0]
    client.answer_feedback(feedback.id, "Спасибо!")
    question = _all(client.iter_questions(is_answered=False))[0]
    client.answer_question(question.id, "Да, есть другие размеры.")
    assert client.acceptance_coefficients([507, 117501])
    assert _all(client.iter_news(from_date=TODAY - timedelta(days=30)))
    assert client.ping("statistics").Status == "OK"

    for request in recorder.requests:
        contract.validate_request(request)
    sent = {(r.method, Contract.split(r.url)[1]) for r in recorder.requests}
    endpoints = {
        (e.method, e.path) for e in vars(wb_client_module).values() if isinstance(e, wb_client_module.Endpoint)
    }
    # Every method the client knows was exercised, except the single-item reads that only back the
    # check after a failed answer (the simulator does not serve them) and the buffer of price tasks
    # still waiting (the simulator processes a task at once).
    assert endpoints - sent == {
        ("GET", "/api/v1/feedback"),
        ("GET", "/api/v1/question"),
        ("GET", "/api/v2/buffer/tasks"),
    }
