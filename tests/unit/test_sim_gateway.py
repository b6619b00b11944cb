"""WB's gateway in the simulator: tokens, rate limits and time scaling, penalties, faults, routes, /__sim."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from datetime import date, timedelta

import httpx
import orjson
import pytest

from tests.sim_fixtures import NOW, Wb, served, small_sim
from tests.system.harness import wait_for
from wb_simulator import CabinetSpec, Simulator

ORDERS = "/api/v1/supplier/orders"
SALES = "/api/v1/supplier/sales"


def payload(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


@pytest.fixture(scope="module")
def fast() -> Iterator[tuple[Simulator, str]]:
    sim = small_sim(time_scale=1e6)
    with served(sim, token=None) as (base_url, _):
        yield sim, base_url


def status_and_detail(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json().get("detail", "")


def test_tokens_are_checked_like_wb(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    good = sim.token("c1")
    other_sim = small_sim(seed=99).token("c1")
    forged = good.split(".")
    claims = payload(good) | {"s": 2**31 - 1}
    forged[1] = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    revoked = sim.token("c1")
    sim.revoke(revoked)

    def call(token: str | None, category: str = "statistics", path: str = ORDERS) -> httpx.Response:
        return Wb(base, token).get(category, path, dateFrom="2026-08-19")

    assert call(good).status_code == 200
    assert call("Bearer " + good).status_code == 200
    for bad in (None, "garbage", other_sim, ".".join(forged), revoked):
        status, detail = status_and_detail(call(bad))
        assert status == 401 and "token is malformed" in detail
    assert status_and_detail(call(sim.token("c1", expired=True))) == (401, "token problem; token expired")
    content_only = sim.token("c1", categories=["content"])
    assert status_and_detail(call(content_only)) == (401, "token problem; token scope not allowed")
    assert call(content_only, "content", "/ping").status_code == 200
    assert call(content_only, "common", "/api/v1/seller-info").status_code == 200  # common takes any category
    assert status_and_detail(call(sim.token("c1", token_type="test")))[0] == 401
    answer = call(good)
    assert good not in answer.text and all(good not in v for v in answer.headers.values())


def test_token_claims_are_wbs(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    token = sim.token("c1", categories=["statistics", "finance"], token_type="personal")
    claims = payload(token)
    assert claims["acc"] == 3 and claims["for"] == "self" and claims["s"] == (1 << 5) | (1 << 13)
    assert claims["exp"] - sim.now_ts() == 180 * 86400
    assert claims["sid"] == Wb(base, token).get("common", "/api/v1/seller-info").json()["sid"]
    assert payload(sim.token("c1", token_type="base"))["acc"] == 1


def test_read_only_token_reads_but_cannot_write(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    wb = Wb(base, sim.token("c1", read_only=True))
    assert wb.get("prices", "/api/v2/list/goods/filter", limit=1).status_code == 200
    refused = wb.post("prices", "/api/v2/upload/task", {"data": [{"nmID": 1, "price": 100}]})
    assert refused.status_code == 401 and "scope not allowed" in refused.json()["detail"]


def test_base_token_cannot_read_the_stocks_report(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    answer = Wb(base, sim.token("c1", token_type="base")).post(
        "analytics", "/api/analytics/v1/stocks-report/wb-warehouses", {}
    )
    assert answer.status_code == 403


def test_rate_limits_per_group_seller_and_token_type() -> None:
    specs = [CabinetSpec(id="c1", products=8, orders_per_day=50, history_days=10), CabinetSpec(id="c2", products=5)]
    sim = Simulator(seed=3, cabinets=specs, time_scale=1, now=NOW)
    with served(sim) as (base, wb):
        orders = [wb.get("statistics", ORDERS, dateFrom="2026-08-20T15:00:00") for _ in range(11)]
        assert [r.status_code for r in orders] == [200] * 10 + [429]
        assert [r.headers["X-Ratelimit-Remaining"] for r in orders[:10]] == [str(n) for n in range(9, -1, -1)]
        throttled = orders[10]
        assert throttled.json()["title"] == "too many requests" and throttled.json()["status"] == 429
        assert "X-Ratelimit-Remaining" not in throttled.headers
        assert int(throttled.headers["X-Ratelimit-Retry"]) in (59, 60)
        assert throttled.headers["X-Ratelimit-Limit"] == "10"
        assert int(throttled.headers["X-Ratelimit-Reset"]) >= 590
        # Sales are their own group (burst 1); another cabinet and a Base token have their own budgets.
        assert [wb.get("statistics", SALES, dateFrom="2026-08-20").status_code for _ in range(2)] == [200, 429]
        assert Wb(base, sim.token("c2")).get("statistics", ORDERS, dateFrom="2026-08-20").status_code == 200
        assert (
            Wb(base, sim.token("c1", token_type="base")).get("statistics", ORDERS, dateFrom="2026-08-20").status_code
            == 200
        )
        # Prices share one bucket for the whole category (burst 5).
        mixed = [
            wb.get("prices", "/api/v2/list/goods/filter", limit=1)
            if i % 2
            else wb.get("prices", "/api/v2/history/tasks", uploadID=1)
            for i in range(6)
        ]
        assert [r.status_code for r in mixed] == [200] * 5 + [429]


def poll_until_ok(call, deadline_s: float = 10.0) -> httpx.Response:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while True:
        answer = call()
        if answer.status_code != 429 or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def test_time_scale_shortens_waits_but_keeps_wb_seconds() -> None:
    sim = small_sim(time_scale=600)
    with served(sim) as (_, wb):

        def sales() -> httpx.Response:
            return wb.get("statistics", SALES, dateFrom="2026-08-20")

        assert sales().status_code == 200
        throttled = sales()
        # A few real milliseconds are seconds here: WB's one-minute wait, minus what already passed.
        assert throttled.status_code == 429 and 40 <= int(throttled.headers["X-Ratelimit-Retry"]) <= 60
        assert poll_until_ok(sales).status_code == 200  # after ~0.1 s of real time, one simulated minute


def test_penalty_blocks_a_group_or_a_category_until_it_is_over() -> None:
    sim = small_sim(time_scale=600)
    with served(sim) as (_, wb):
        sim.penalize("c1", "statistics.orders", 300)
        blocked = wb.get("statistics", ORDERS, dateFrom="2026-08-20")
        assert blocked.status_code == 429 and 250 <= int(blocked.headers["X-Ratelimit-Retry"]) <= 300
        assert wb.get("statistics", SALES, dateFrom="2026-08-20").status_code == 200
        assert poll_until_ok(lambda: wb.get("statistics", ORDERS, dateFrom="2026-08-20")).status_code == 200
        sim.penalize("c1", "advert", 120)
        assert wb.get("advert", "/adv/v1/promotion/count").status_code == 429
        assert wb.get("advert", "/api/advert/v2/adverts").status_code == 429
        assert poll_until_ok(lambda: wb.get("advert", "/adv/v1/promotion/count")).status_code == 200
    with pytest.raises(ValueError, match="unknown limit group"):
        sim.penalize("c1", "statistics.nope", 1)


def test_each_fault_kind(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    wb = Wb(base, sim.token("c1"))
    try:
        rule = sim.faults.set("GET statistics/api/v1/supplier/orders", error_rate=1.0, times=2)
        codes = [wb.get("statistics", ORDERS, dateFrom="2026-08-20").status_code for _ in range(3)]
        assert codes[0] >= 500 and codes[1] >= 500 and codes[2] == 200 and rule.fired == 2
        sim.faults.set("*supplier/orders", rate_429=True, times=1)
        throttled = wb.get("statistics", ORDERS, dateFrom="2026-08-20")
        assert throttled.status_code == 429 and throttled.headers["X-Ratelimit-Retry"] == "1"
        sim.faults.set("statistics/*", truncate=True, times=1)
        cut = wb.get("statistics", ORDERS, dateFrom="2026-08-19")
        assert cut.status_code == 200
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(cut.content)
        sim.faults.set("statistics/*", malformed=True, times=1)
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(wb.get("statistics", ORDERS, dateFrom="2026-08-19").content)
        sim.faults.set("statistics/*", wrong_types=True, times=1)
        rows = wb.get("statistics", ORDERS, dateFrom="2026-08-19").json()
        assert (
            isinstance(rows[0]["nmId"], str) and isinstance(rows[0]["date"], int) and isinstance(rows[1]["nmId"], int)
        )
        sim.faults.set("statistics/*", empty_204=True, times=1)
        empty = wb.get("statistics", ORDERS, dateFrom="2026-08-19")
        assert empty.status_code == 204 and empty.content == b""
        sim.faults.set("POST finance/*", error_rate=1.0)
        assert wb.get("statistics", ORDERS, dateFrom="2026-08-19").status_code == 200
        sim.faults.set("content/*", latency_s=0.2)
        started = time.monotonic()
        assert wb.get("content", "/ping").status_code == 200
        assert time.monotonic() - started >= 0.2
    finally:
        sim.faults.clear()
    assert (
        wb.post(
            "finance", "/api/finance/v1/sales-reports/detailed", {"dateFrom": "2026-08-01", "dateTo": "2026-08-02"}
        ).status_code
        == 200
    )


def test_a_lost_reply_is_a_5xx_for_a_write_wb_applied(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    wb = Wb(base, sim.token("c1"))
    goods = wb.get("prices", "/api/v2/list/goods/filter", limit=1).json()["data"]["listGoods"][0]
    body = {"data": [{"nmID": goods["nmID"], "price": int(goods["sizes"][0]["price"]) + 1}]}
    try:
        sim.faults.set("POST prices/api/v2/upload/task", lost_reply=True, times=1)
        assert wb.post("prices", "/api/v2/upload/task", body).status_code >= 500
        # WB applied it: the same task again is WB's "already exists" with the first task's id.
        again = wb.post("prices", "/api/v2/upload/task", body)
        assert again.status_code == 208 and again.json()["data"]["alreadyExists"] is True
    finally:
        sim.faults.clear()
        wb.close()


def test_a_storm_is_reproducible() -> None:
    def storm() -> list[int]:
        sim = small_sim(seed=21, time_scale=1e6)
        sim.faults.set("advert/*", error_rate=0.3, rate_429=0.1)
        with served(sim) as (_, wb):
            return [wb.get("advert", "/adv/v1/promotion/count").status_code for _ in range(60)]

    first, second = storm(), storm()
    assert first == second
    failed = sum(code != 200 for code in first)
    assert 12 <= failed <= 36 and 429 in first and any(code >= 500 for code in first)


def test_routes_wb_does_not_serve_answer_404(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    wb = Wb(base, sim.token("c1"))
    for category, path in (
        ("statistics", "/api/v5/supplier/reportDetailByPeriod"),
        ("statistics", "/api/v1/supplier/stocks"),
        ("supplies", "/api/v1/acceptance/coefficients"),
        ("nowhere", "/ping"),
    ):
        answer = wb.get(category, path, dateFrom="2026-08-01", dateTo="2026-08-02")
        assert answer.status_code == 404 and answer.json()["title"] == "path not found"
    sim.set_coefficients_disabled(True)
    try:
        disabled = wb.get("common", "/api/tariffs/v1/acceptance/coefficients")
        assert disabled.status_code == 404 and "temporarily disabled" in disabled.json()["detail"]
    finally:
        sim.set_coefficients_disabled(False)
    assert wb.get("common", "/api/tariffs/v1/acceptance/coefficients").status_code == 200


def test_control_routes_do_what_the_python_api_does(fast: tuple[Simulator, str]) -> None:
    sim, base = fast
    admin = httpx.Client(base_url=base, timeout=30)
    info = admin.get("/__sim").json()
    assert [c["id"] for c in info["cabinets"]] == ["c1"]
    token = admin.post("/__sim/tokens", json={"cabinet_id": "c1", "categories": ["statistics"]}).json()["token"]
    wb = Wb(base, token)
    assert wb.get("statistics", ORDERS, dateFrom="2026-08-20").status_code == 200
    assert wb.get("content", "/ping").status_code == 401
    assert admin.post("/__sim/faults", json={"pattern": "statistics/*", "error_rate": 1.0}).json() == {"rules": 1}
    assert wb.get("statistics", ORDERS, dateFrom="2026-08-20").status_code >= 500
    assert admin.delete("/__sim/faults").status_code == 200
    # The clock runs 10^6 times fast: an hour of penalty was 3.6 real milliseconds, over before the
    # next request on a loaded machine. 10^10 simulated seconds are about 3 real hours.
    penalty = {"cabinet_id": "c1", "group": "statistics", "seconds": 1e10}
    assert admin.post("/__sim/penalize", json=penalty).status_code == 200
    assert wb.get("statistics", ORDERS, dateFrom="2026-08-20").status_code == 429
    sim.limiter.clear()
    summary = admin.get("/__sim/truth/c1/summary").json()
    assert summary["orders"] == len(sim.truth.orders("c1"))
    day = admin.get("/__sim/truth/c1/days/2026-08-10").json()
    assert day["total"]["orders"] == sim.truth.day_totals("c1", date(2026, 8, 10))["total"]["orders"]
    before = sim.now()
    assert admin.post("/__sim/advance", json={"hours": 2}).status_code == 200
    assert sim.now() - before == timedelta(hours=2)
    bad = admin.post("/__sim/tokens", json={"cabinet_id": "nope"})
    assert bad.status_code == 400 and "nope" in bad.json()["error"]
    assert admin.post("/__sim/revoke", json={"token": token}).status_code == 200
    assert wb.get("statistics", ORDERS, dateFrom="2026-08-20").status_code == 401


def test_a_latency_ends_when_its_rule_is_lifted(fast: tuple[Simulator, str]) -> None:
    """A call held by a long latency is answered once the test lifts the rule, not after the latency:
    the calls a test's deployment has in flight end with the test's fault."""
    sim, base = fast
    wb = Wb(base, sim.token("c1"))
    slow = sim.faults.set("content/*", latency_s=600)
    answers: list[int] = []
    call = threading.Thread(target=lambda: answers.append(wb.get("content", "/ping").status_code))
    try:
        call.start()
        wait_for(lambda: slow.seen, "the call reaching the simulator", timeout=30)
        assert slow.seen == 1
        sim.faults.remove(slow)
        call.join(timeout=30)
        assert answers == [200], "the held call was not answered once its latency was lifted"
    finally:
        sim.faults.clear()
        call.join(timeout=30)
        wb.close()
