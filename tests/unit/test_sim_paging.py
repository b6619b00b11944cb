"""Paging as WB does it: lastChangeDate pages capped at 80,000 rows, rrdId to 204, cursors, offsets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import orjson
import pytest

from tests.sim_fixtures import Wb, served, served_fast_small_sim, small_sim
from wb_simulator import Simulator


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Simulator, Wb]]:
    yield from served_fast_small_sim()


def test_orders_page_by_last_change_date_in_80k_pages_to_an_empty_page() -> None:
    sim = small_sim(orders_per_day=1100, history_days=91, products=30, time_scale=1e6)
    truth = {o["srid"]: o for o in sim.truth.orders("c1")}
    assert len(truth) > 80_000
    pages = []
    with served(sim) as (_, wb):
        date_from = "2026-01-01"
        for _ in range(10):
            page = orjson.loads(wb.get("statistics", "/api/v1/supplier/orders", dateFrom=date_from).content)
            pages.append(page)
            if not page:
                break
            date_from = page[-1]["lastChangeDate"]
    # ~80,000 a page: a page does not end inside a group of rows changed at the same second.
    assert 80_000 <= len(pages[0]) < 80_010 and pages[-1] == []
    # As with WB, the rows at the boundary instant come again at the top of the next page.
    assert pages[1][0]["lastChangeDate"] == pages[0][-1]["lastChangeDate"]
    seen: dict[str, dict] = {}
    for page in pages:
        stamps = [row["lastChangeDate"] for row in page]
        assert stamps == sorted(stamps)
        seen.update((row["srid"], row) for row in page)
    assert seen == truth


def test_report_pages_by_rrd_id_until_204(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    lines, rrd_id, statuses = [], 0, []
    body = {"dateFrom": "2026-07-15", "dateTo": "2026-08-19", "limit": 700, "period": "daily"}
    while len(statuses) < 100:
        response = wb.post("finance", "/api/finance/v1/sales-reports/detailed", {**body, "rrdId": rrd_id})
        statuses.append(response.status_code)
        if response.status_code == 204:
            break
        page = response.json()
        assert len(page) <= 700
        lines.extend(page)
        rrd_id = page[-1]["rrdId"]
    assert statuses[-1] == 204 and set(statuses[:-1]) == {200} and len(statuses) > 2
    assert response.content == b""
    assert lines == sim.truth.report_lines("c1", date(2026, 7, 15), date(2026, 8, 19))
    weekly = wb.post(
        "finance", "/api/finance/v1/sales-reports/detailed", {**body, "period": "weekly", "limit": 100000}
    ).json()
    # The week of 17-23 August has no weekly report yet on the 20th.
    assert weekly and max(line["rrDate"] for line in weekly) <= "2026-08-16"
    assert {line["dateFrom"] for line in weekly} <= {
        "2026-07-13",
        "2026-07-20",
        "2026-07-27",
        "2026-08-03",
        "2026-08-10",
    }
    only = wb.post(
        "finance", "/api/finance/v1/sales-reports/detailed", {**body, "limit": 5, "fields": ["rrdId", "srid"]}
    ).json()
    assert [set(line) for line in only] == [{"rrdId", "srid"}] * 5


def test_cards_page_by_cursor_until_total_below_limit(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    cursor: dict = {"limit": 5}
    cards, totals = [], []
    while len(totals) < 10:
        body = {"settings": {"sort": {"ascending": True}, "cursor": cursor, "filter": {"withPhoto": -1}}}
        answer = wb.post("content", "/content/v2/get/cards/list", body).json()
        cards.extend(answer["cards"])
        totals.append(answer["cursor"]["total"])
        if answer["cursor"]["total"] < 5:
            break
        cursor = {"limit": 5, "updatedAt": answer["cursor"]["updatedAt"], "nmID": answer["cursor"]["nmID"]}
    assert totals == [5, 5, 2]
    assert sorted(c["nmID"] for c in cards) == sorted(c["nmID"] for c in sim.truth.cards("c1"))
    assert [(c["updatedAt"], c["nmID"]) for c in cards] == sorted((c["updatedAt"], c["nmID"]) for c in cards)


def test_goods_page_by_offset(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    pages = [
        wb.get("prices", "/api/v2/list/goods/filter", limit=5, offset=off).json()["data"]["listGoods"]
        for off in (0, 5, 10, 15)
    ]
    assert [len(p) for p in pages] == [5, 5, 2, 0]
    assert [g for p in pages for g in p] == sim.truth.prices("c1")
    one = sim.truth.prices("c1")[3]["nmID"]
    assert [
        g["nmID"]
        for g in wb.get("prices", "/api/v2/list/goods/filter", limit=10, filterNmID=one).json()["data"]["listGoods"]
    ] == [one]


def test_feedbacks_and_questions_page_by_skip_and_take(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    unanswered = [f for f in sim.truth.feedbacks("c1") if f["answer"] is None]
    pages = [
        wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="false", take=7, skip=skip, order="dateAsc").json()["data"]
        for skip in range(0, len(unanswered) + 7, 7)
    ]
    assert pages[0]["countUnanswered"] == len(unanswered)
    assert [f["id"] for p in pages for f in p["feedbacks"]] == [f["id"] for f in unanswered]
    assert wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="false", take=1, skip=199_991).status_code == 400
    too_far = wb.get("feedbacks", "/api/v1/questions", isAnswered="true", take=5000, skip=5001)
    assert too_far.status_code == 400 and "10000" in too_far.json()["errorText"]
    nm = unanswered[0]["productDetails"]["nmId"]
    mine = wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="false", take=5000, skip=0, nmId=nm).json()["data"][
        "feedbacks"
    ]
    assert mine and {f["productDetails"]["nmId"] for f in mine} == {nm}


def test_news_from_id_and_from_date_at_most_100(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    news = sim.truth.news()
    first = news[0]["id"]
    page = wb.get("common", "/api/communications/v2/news", fromID=first + 3).json()["data"]
    assert [n["id"] for n in page] == [n["id"] for n in news if n["id"] >= first + 3][:100]
    by_date = wb.get("common", "/api/communications/v2/news", **{"from": "2026-08-01"}).json()["data"]
    assert by_date and all(n["date"] >= "2026-08-01" for n in by_date)
    big = Simulator(seed=2, cabinets=None, now=sim.now().replace(tzinfo=None))
    big.news.ensure(big.now_ts() + 400 * 86400)
    assert len(big.news.select(big.now_ts() + 400 * 86400, None, 0)) == 100
