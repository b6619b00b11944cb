"""Every simulator answer (successes and WB's documented errors) validates against WB's OpenAPI files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.sim_fixtures import Wb, served, small_sim
from wb_simulator.contract import Contract, ContractError


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, Any]]:
    # Rate limits a million times faster: this module checks shapes, not pacing.
    sim = small_sim(time_scale=1e6)
    with served(sim) as (base_url, wb):
        ads = sim.truth.campaigns("c1")
        live = next(a for a in ads if a["status"] in (9, 11))
        feedback = next(f for f in sim.truth.feedbacks("c1") if f["answer"] is None)
        question = next(q for q in sim.truth.questions("c1") if q["answer"] is None)
        yield {
            "sim": sim,
            "wb": wb,
            "base_url": base_url,
            "ids": ",".join(str(a["id"]) for a in ads),
            "live": live,
            "nm": live["nm_settings"][0]["nm_id"],
            "placement": "combined" if live["bid_type"] == "unified" else "search",
            "feedback": feedback["id"],
            "question": question["id"],
        }


Call = Callable[[Wb, dict[str, Any]], httpx.Response]
CATEGORIES = ("statistics", "finance", "advert", "analytics", "content", "prices", "feedbacks", "common", "supplies")


def _ping(category: str) -> Call:
    return lambda wb, e: wb.get(category, "/ping")


def fullstats(begin: str, end: str) -> Call:
    """GET /adv/v3/fullstats of the cabinet's campaigns from ``begin`` to ``end``."""
    return lambda wb, e: wb.get("advert", "/adv/v3/fullstats", ids=e["ids"], beginDate=begin, endDate=end)


def set_bid(kopecks: int) -> Call:
    """PATCH /api/advert/v1/bids: the live campaign's product at ``kopecks``."""

    def call(wb: Wb, e: dict[str, Any]) -> httpx.Response:
        nm_bid = {"nm_id": e["nm"], "bid_kopecks": kopecks, "placement": e["placement"]}
        return wb.patch(
            "advert", "/api/advert/v1/bids", {"bids": [{"advert_id": e["live"]["id"], "nm_bids": [nm_bid]}]}
        )

    return call


# (name, the call, expected status). Every request here is valid per WB's spec.
VALID: list[tuple[str, Call, int]] = [
    *[(f"ping {c}", _ping(c), 200) for c in CATEGORIES],
    ("orders flag=0", lambda wb, e: wb.get("statistics", "/api/v1/supplier/orders", dateFrom="2026-08-10"), 200),
    (
        "orders flag=1",
        lambda wb, e: wb.get("statistics", "/api/v1/supplier/orders", dateFrom="2026-08-19", flag=1),
        200,
    ),
    ("sales flag=0", lambda wb, e: wb.get("statistics", "/api/v1/supplier/sales", dateFrom="2026-08-10T10:00:00"), 200),
    (
        "report lines",
        lambda wb, e: wb.post(
            "finance",
            "/api/finance/v1/sales-reports/detailed",
            {"dateFrom": "2026-08-01", "dateTo": "2026-08-19", "limit": 500, "period": "daily"},
        ),
        200,
    ),
    (
        "report end (204)",
        lambda wb, e: wb.post(
            "finance",
            "/api/finance/v1/sales-reports/detailed",
            {"dateFrom": "2026-08-01", "dateTo": "2026-08-19", "rrdId": 10**12},
        ),
        204,
    ),
    ("campaign count", lambda wb, e: wb.get("advert", "/adv/v1/promotion/count"), 200),
    ("campaigns", lambda wb, e: wb.get("advert", "/api/advert/v2/adverts", ids=e["ids"], payment_type="cpm"), 200),
    ("fullstats", fullstats("2026-07-25", "2026-08-19"), 200),
    ("fullstats over 31 days", fullstats("2026-07-01", "2026-08-19"), 400),
    ("fullstats of today", fullstats("2026-08-20", "2026-08-20"), 400),
    ("set bid", set_bid(60000), 200),
    ("bid under the minimum", set_bid(3), 400),
    (
        "min bids",
        lambda wb, e: wb.post(
            "advert",
            "/api/advert/v1/bids/min",
            {
                "advert_id": e["live"]["id"],
                "nm_ids": [e["nm"]],
                "payment_type": "cpc",
                "placement_types": ["combined", "search"],
            },
        ),
        200,
    ),
    (
        "funnel with comparison",
        lambda wb, e: wb.post(
            "analytics",
            "/api/analytics/v3/sales-funnel/products",
            {
                "selectedPeriod": {"start": "2026-08-10", "end": "2026-08-19"},
                "pastPeriod": {"start": "2026-08-01", "end": "2026-08-09"},
                "orderBy": {"field": "orderSum", "mode": "desc"},
                "limit": 5,
            },
        ),
        200,
    ),
    (
        "funnel beyond a year",
        lambda wb, e: wb.post(
            "analytics",
            "/api/analytics/v3/sales-funnel/products",
            {"selectedPeriod": {"start": "2025-01-01", "end": "2025-01-02"}},
        ),
        400,
    ),
    (
        "funnel history by week",
        lambda wb, e: wb.post(
            "analytics",
            "/api/analytics/v3/sales-funnel/products/history",
            {
                "selectedPeriod": {"start": "2026-08-14", "end": "2026-08-20"},
                "nmIds": [e["nm"]],
                "aggregationLevel": "week",
            },
        ),
        200,
    ),
    (
        "stocks report",
        lambda wb, e: wb.post("analytics", "/api/analytics/v1/stocks-report/wb-warehouses", {"limit": 20, "offset": 0}),
        200,
    ),
    (
        "cards",
        lambda wb, e: wb.post(
            "content",
            "/content/v2/get/cards/list",
            {"settings": {"sort": {"ascending": True}, "cursor": {"limit": 5}, "filter": {"withPhoto": -1}}},
        ),
        200,
    ),
    ("goods", lambda wb, e: wb.get("prices", "/api/v2/list/goods/filter", limit=5, offset=0), 200),
    (
        "price task",
        lambda wb, e: wb.post(
            "prices", "/api/v2/upload/task", {"data": [{"nmID": e["nm"], "price": 9000, "discount": 5}]}
        ),
        200,
    ),
    (
        "same task (208)",
        lambda wb, e: wb.post(
            "prices", "/api/v2/upload/task", {"data": [{"nmID": e["nm"], "price": 9000, "discount": 5}]}
        ),
        208,
    ),
    (
        "price task refused",
        lambda wb, e: wb.post("prices", "/api/v2/upload/task", {"data": [{"nmID": e["nm"], "price": 9000}]}),
        400,
    ),
    ("task status", lambda wb, e: wb.get("prices", "/api/v2/history/tasks", uploadID=1_000_000), 200),
    ("task goods", lambda wb, e: wb.get("prices", "/api/v2/history/goods/task", uploadID=1_000_000, limit=10), 200),
    ("buffer task", lambda wb, e: wb.get("prices", "/api/v2/buffer/tasks", uploadID=1_000_000), 200),
    ("buffer goods", lambda wb, e: wb.get("prices", "/api/v2/buffer/goods/task", uploadID=1_000_000, limit=10), 200),
    (
        "feedbacks",
        lambda wb, e: wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="false", take=20, skip=0, order="dateAsc"),
        200,
    ),
    (
        "answered feedbacks",
        lambda wb, e: wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="true", take=20, skip=0),
        200,
    ),
    ("one feedback", lambda wb, e: wb.get("feedbacks", "/api/v1/feedback", id=e["feedback"]), 200),
    ("one question", lambda wb, e: wb.get("feedbacks", "/api/v1/question", id=e["question"]), 200),
    (
        "answer a feedback",
        lambda wb, e: wb.post("feedbacks", "/api/v1/feedbacks/answer", {"id": e["feedback"], "text": "Спасибо!"}),
        204,
    ),
    (
        "answer without Content-Type",
        lambda wb, e: wb.http.post("/feedbacks/api/v1/feedbacks/answer", content=b'{"id":"x","text":"ok"}'),
        400,
    ),
    (
        "feedbacks take over 5000",
        lambda wb, e: wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="false", take=5001, skip=0),
        400,
    ),
    ("questions", lambda wb, e: wb.get("feedbacks", "/api/v1/questions", isAnswered="false", take=20, skip=0), 200),
    (
        "question viewed",
        lambda wb, e: wb.patch("feedbacks", "/api/v1/questions", {"id": e["question"], "wasViewed": True}),
        200,
    ),
    (
        "answer a question",
        lambda wb, e: wb.patch(
            "feedbacks", "/api/v1/questions", {"id": e["question"], "answer": {"text": "Да"}, "state": "wbRu"}
        ),
        200,
    ),
    (
        "unknown question",
        lambda wb, e: wb.patch("feedbacks", "/api/v1/questions", {"id": "nope", "wasViewed": True}),
        404,
    ),
    ("unanswered feedbacks", lambda wb, e: wb.get("feedbacks", "/api/v1/feedbacks/count-unanswered"), 200),
    ("unanswered questions", lambda wb, e: wb.get("feedbacks", "/api/v1/questions/count-unanswered"), 200),
    ("news from a date", lambda wb, e: wb.get("common", "/api/communications/v2/news", **{"from": "2026-08-01"}), 200),
    ("news from an id", lambda wb, e: wb.get("common", "/api/communications/v2/news", fromID=7005), 200),
    ("news without from", lambda wb, e: wb.get("common", "/api/communications/v2/news"), 400),
    (
        "coefficients",
        lambda wb, e: wb.get("common", "/api/tariffs/v1/acceptance/coefficients", warehouseIDs="507,117501"),
        200,
    ),
    (
        "coefficients, bad ids",
        lambda wb, e: wb.get("common", "/api/tariffs/v1/acceptance/coefficients", warehouseIDs="x"),
        400,
    ),
    ("seller info", lambda wb, e: wb.get("common", "/api/v1/seller-info"), 200),
    ("bad token", lambda wb, e: Wb(e["base_url"], "garbage").get("content", "/ping"), 401),
]

# Requests WB's spec itself rejects: only the error answer is checked (the request cannot be valid).
INVALID: list[tuple[str, Call, int]] = [
    ("orders without dateFrom", lambda wb, e: wb.get("statistics", "/api/v1/supplier/orders"), 400),
    (
        "report without dateTo",
        lambda wb, e: wb.post("finance", "/api/finance/v1/sales-reports/detailed", {"dateFrom": "2026-08-01"}),
        400,
    ),
    ("campaigns, bad payment type", lambda wb, e: wb.get("advert", "/api/advert/v2/adverts", payment_type="cash"), 400),
    (
        "funnel limit over 1000",
        lambda wb, e: wb.post(
            "analytics",
            "/api/analytics/v3/sales-funnel/products",
            {"selectedPeriod": {"start": "2026-08-10", "end": "2026-08-19"}, "limit": 5000},
        ),
        400,
    ),
    (
        "cards limit over 100",
        lambda wb, e: wb.post("content", "/content/v2/get/cards/list", {"settings": {"cursor": {"limit": 101}}}),
        400,
    ),
    ("goods limit over 1000", lambda wb, e: wb.get("prices", "/api/v2/list/goods/filter", limit=1001), 400),
]


@pytest.mark.parametrize(("name", "call", "status"), VALID, ids=[v[0] for v in VALID])
def test_answers_match_wb_spec(env: dict[str, Any], contract: Contract, name: str, call: Call, status: int) -> None:
    response = call(env["wb"], env)
    assert response.status_code == status, response.text[:500]
    contract.validate(response)


@pytest.mark.parametrize(("name", "call", "status"), INVALID, ids=[v[0] for v in INVALID])
def test_errors_for_requests_wb_rejects_match_wb_spec(
    env: dict[str, Any], contract: Contract, name: str, call: Call, status: int
) -> None:
    response = call(env["wb"], env)
    assert response.status_code == status, response.text[:500]
    with pytest.raises(ContractError):
        contract.validate_request(response.request)
    contract.validate_response(response)


def test_throttled_answer_matches_wb_spec(contract: Contract) -> None:
    sim = small_sim(time_scale=1.0)
    with served(sim) as (_, wb):
        answers = [wb.get("statistics", "/api/v1/supplier/sales", dateFrom="2026-08-19") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 429]
    contract.validate(answers[1])


def test_contract_catches_a_field_wb_does_not_have(env: dict[str, Any], contract: Contract) -> None:
    good = env["wb"].get("common", "/api/v1/seller-info")
    broken = httpx.Response(200, json={**good.json(), "extra": 1}, request=good.request)
    with pytest.raises(ContractError, match="extra"):
        contract.validate_response(broken)
