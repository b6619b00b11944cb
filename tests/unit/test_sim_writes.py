"""Write methods change the simulator's state (what engines are verified against) and are logged."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest

from tests.sim_fixtures import Wb, served_fast_small_sim
from wb_simulator import Simulator
from wb_simulator.pricing import QUARANTINE_TEXT

BIDS = "/api/advert/v1/bids"


@pytest.fixture
def env() -> Iterator[tuple[Simulator, Wb]]:
    yield from served_fast_small_sim()


def bid_body(advert_id: int, nm: int, bid: int, placement: str) -> dict[str, Any]:
    return {"bids": [{"advert_id": advert_id, "nm_bids": [{"nm_id": nm, "bid_kopecks": bid, "placement": placement}]}]}


def test_bids_change_the_campaign_and_respect_the_minimum(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    campaign = next(c for c in sim.truth.campaigns("c1") if c["status"] in (9, 11) and c["bid_type"] == "manual")
    nm = campaign["nm_settings"][0]["nm_id"]
    payment = campaign["settings"]["payment_type"]
    floor = wb.post(
        "advert",
        "/api/advert/v1/bids/min",
        {"advert_id": campaign["id"], "nm_ids": [nm], "payment_type": payment, "placement_types": ["search"]},
    ).json()["bids"][0]["bids"][0]["value"]

    low = wb.patch("advert", BIDS, bid_body(campaign["id"], nm, 3, "search"))
    assert low.status_code == 400 and low.json()["detail"] == f"wrong bid value: 3; min: {floor}"
    assert wb.patch("advert", BIDS, bid_body(campaign["id"], nm, floor - 1, "search")).status_code == 400
    assert wb.patch("advert", BIDS, bid_body(campaign["id"], nm, floor + 500, "combined")).status_code == 400
    assert sim.writes == []

    ok = wb.patch("advert", BIDS, bid_body(campaign["id"], nm, floor, "search"))
    assert ok.status_code == 200 and ok.json()["currency"] == "RUB"
    shown = wb.get("advert", "/api/advert/v2/adverts", ids=str(campaign["id"])).json()["adverts"][0]
    settings = next(s for s in shown["nm_settings"] if s["nm_id"] == nm)
    assert settings["bids_kopecks"]["search"] == floor
    assert settings["bids_kopecks"]["recommendations"] == campaign["nm_settings"][0]["bids_kopecks"]["recommendations"]
    assert [(w.kind, w.cabinet_id, w.payload) for w in sim.writes] == [
        ("bids", "c1", bid_body(campaign["id"], nm, floor, "search"))
    ]

    finished = next(c for c in sim.truth.campaigns("c1") if c["status"] == 7)
    closed = wb.patch("advert", BIDS, bid_body(finished["id"], finished["nm_settings"][0]["nm_id"], 90_000, "search"))
    assert closed.status_code == 400 and "status 7" in closed.json()["detail"]
    assert wb.patch("advert", BIDS, bid_body(1, nm, 90_000, "search")).json()["detail"] == "advert 1 not found"


def test_price_tasks_apply_quarantine_and_deduplicate(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    goods = {g["nmID"]: g for g in sim.truth.prices("c1")}
    a, b = list(goods)[:2]
    raise_a = {"nmID": a, "price": goods[a]["sizes"][0]["price"] + 100, "discount": 10}
    crash_b = {"nmID": b, "price": 10, "discount": 0}  # far more than 3x cheaper: quarantine

    first = wb.post("prices", "/api/v2/upload/task", {"data": [raise_a, crash_b]})
    assert first.status_code == 200 and first.json()["data"]["alreadyExists"] is False
    upload_id = first.json()["data"]["id"]
    status = wb.get("prices", "/api/v2/history/tasks", uploadID=upload_id).json()["data"]
    assert (status["status"], status["overAllGoodsNumber"], status["successGoodsNumber"]) == (5, 2, 1)
    items = {
        g["nmID"]: g
        for g in wb.get("prices", "/api/v2/history/goods/task", uploadID=upload_id, limit=10).json()["data"][
            "historyGoods"
        ]
    }
    assert items[a]["status"] == 2 and items[a]["errorText"] is None
    assert items[b]["status"] == 3 and items[b]["errorText"] == QUARANTINE_TEXT
    now = {g["nmID"]: g for g in sim.truth.prices("c1")}
    assert (now[a]["sizes"][0]["price"], now[a]["discount"]) == (raise_a["price"], 10)
    assert now[b] == goods[b]

    again = wb.post("prices", "/api/v2/upload/task", {"data": [crash_b, raise_a]})
    assert again.status_code == 208 and again.json()["data"] == {"id": upload_id, "alreadyExists": True}
    assert [w.kind for w in sim.writes] == ["price_task"]

    only_quarantine = wb.post("prices", "/api/v2/upload/task", {"data": [{"nmID": b, "price": 11}]}).json()["data"][
        "id"
    ]
    assert wb.get("prices", "/api/v2/history/tasks", uploadID=only_quarantine).json()["data"]["status"] == 6

    def refused(items: list[dict[str, Any]]) -> str:
        answer = wb.post("prices", "/api/v2/upload/task", {"data": items})
        assert answer.status_code == 400 and answer.json()["error"] is True
        return answer.json()["errorText"]

    assert (
        refused([{"nmID": a, "price": raise_a["price"], "discount": 10}])
        == "The specified prices and discounts are already set"
    )
    assert refused([raise_a, raise_a]) == "Duplicate item Nos."
    assert refused([{"nmID": 10_000 + i, "price": 500} for i in range(1001)]).startswith("Upload limit exceeded")
    assert refused([{"nmID": a}]) == "Price and discount not specified"
    assert refused([]) == "Empty data"


def test_answering_feedbacks_and_questions(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    fid = sim.add_feedback("c1", sim.truth.cards("c1")[0]["nmID"], "Отличная вещь", 5)
    unanswered = wb.get("feedbacks", "/api/v1/feedbacks/count-unanswered").json()["data"]
    assert unanswered["countUnansweredToday"] >= 1

    assert wb.post("feedbacks", "/api/v1/feedbacks/answer", {"id": fid, "text": "Спасибо за отзыв!"}).status_code == 204
    answered = wb.get("feedbacks", "/api/v1/feedbacks", isAnswered="true", take=5000, skip=0).json()["data"][
        "feedbacks"
    ]
    mine = next(f for f in answered if f["id"] == fid)
    assert mine["answer"]["text"] == "Спасибо за отзыв!" and mine["state"] == "wbRu"
    after = wb.get("feedbacks", "/api/v1/feedbacks/count-unanswered").json()["data"]
    assert after["countUnanswered"] == unanswered["countUnanswered"] - 1

    # WB does not check the id: an unknown one "succeeds" and changes nothing.
    assert wb.post("feedbacks", "/api/v1/feedbacks/answer", {"id": "no-such-id", "text": "ok"}).status_code == 204
    assert wb.post("feedbacks", "/api/v1/feedbacks/answer", {"id": fid, "text": "x"}).status_code == 400
    assert [(w.kind, w.result) for w in sim.writes] == [
        ("feedback_answer", {"found": True}),
        ("feedback_answer", {"found": False}),
    ]

    qid = sim.add_question("c1", sim.truth.cards("c1")[1]["nmID"], "Есть размер XL?")
    assert (
        wb.patch("feedbacks", "/api/v1/questions", {"id": qid, "answer": {"text": "Да"}, "state": "wbRu"}).status_code
        == 200
    )
    assert (
        wb.patch(
            "feedbacks", "/api/v1/questions", {"id": qid, "answer": {"text": "Да, есть"}, "state": "wbRu"}
        ).status_code
        == 200
    )
    third = wb.patch("feedbacks", "/api/v1/questions", {"id": qid, "answer": {"text": "Нет"}, "state": "wbRu"})
    assert third.status_code == 422 and third.json()["errorText"] == "Не удалось отредактировать вопрос"
    question = next(q for q in sim.truth.questions("c1") if q["id"] == qid)
    assert question["answer"]["text"] == "Да, есть" and question["answer"]["editable"] is False
    rejected = sim.add_question("c1", sim.truth.cards("c1")[1]["nmID"], "Спам")
    assert (
        wb.patch(
            "feedbacks", "/api/v1/questions", {"id": rejected, "answer": {"text": "Не по теме"}, "state": "none"}
        ).status_code
        == 200
    )
    open_ids = {
        q["id"]
        for q in wb.get("feedbacks", "/api/v1/questions", isAnswered="false", take=5000, skip=0).json()["data"][
            "questions"
        ]
    }
    assert qid not in open_ids and rejected not in open_ids


def test_slots_open_and_change_over_time(env: tuple[Simulator, Wb]) -> None:
    sim, wb = env
    day = date(2026, 8, 25)
    sim.open_slot(507, day, coefficient=0, box_type_id=2)
    rows = wb.get("common", "/api/tariffs/v1/acceptance/coefficients", warehouseIDs="507").json()
    assert {r["warehouseID"] for r in rows} == {507}
    assert {r["date"][:10] for r in rows} == {(date(2026, 8, 20) + timedelta(days=i)).isoformat() for i in range(14)}
    slot = next(r for r in rows if r["date"].startswith("2026-08-25") and r["boxTypeID"] == 2)
    assert slot["coefficient"] == 0 and slot["allowUnload"] is True
    before = sim.truth.coefficients([117501])
    sim.advance(timedelta(hours=6))
    after = sim.truth.coefficients([117501])
    assert [r["coefficient"] for r in before] != [r["coefficient"] for r in after]
    with pytest.raises(ValueError, match="unknown warehouse"):
        sim.open_slot(1, day)
