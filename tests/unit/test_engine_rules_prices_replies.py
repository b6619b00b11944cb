"""The engines' rules as a seller reads them: repricer decisions and slots, bulk items, reply matching."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal as D

from optima_pipelines.engines import autoreply, pricing_bulk, repricer
from optima_pipelines.engines.repricer import Rule, decide, selling


def test_the_repricer_follows_a_target_price_keeping_the_discount():
    d = decide(Rule(1, 10, target_price=D(900)), D(2000), 50)  # sells at 1000
    assert d.new_price == 1800 and d.new_selling == D(900)
    assert "target 900" in d.reason


def test_the_margin_floor_wins_over_the_target_and_the_ceiling():
    # cost 600 and 25 % margin: never below 800, even when the target or the ceiling say less
    rule = Rule(1, 10, target_price=D(700), max_price=D(750), cost=D(600), min_margin_pct=D(25))
    d = decide(rule, D(1000), 0)
    assert d.new_price == 800 and "25 % margin on cost 600" in d.reason
    assert (d.new_selling - rule.cost) / d.new_selling >= D("0.25")  # type: ignore[operator]


def test_clamps_to_min_and_max():
    assert decide(Rule(1, 10, target_price=D(5000), max_price=D(1200)), D(1000), 0).new_price == 1200
    assert decide(Rule(1, 10, min_price=D(1100)), D(1000), 0).new_price == 1100
    assert decide(Rule(1, 10, min_price=D(900), max_price=D(1100)), D(1000), 0).new_price is None


def test_a_big_cut_is_spread_over_runs_so_wb_never_quarantines_it():
    rule = Rule(1, 10, target_price=D(100))  # from 1000: a cut to a tenth
    price = D(1000)
    steps = []
    for _ in range(6):
        d = decide(rule, price, 0)
        if d.new_price is None:
            break
        assert selling(D(d.new_price), 0) * 3 > selling(price, 0), "WB would quarantine this cut"
        steps.append(d.new_price)
        price = D(d.new_price)
    assert steps == [500, 250, 125, 100]
    assert "WB quarantines" in decide(rule, D(1000), 0).reason


def test_rounding_keeps_the_floor_and_the_ceiling():
    # 30 % discount: a selling price of 1000 needs 1428.57 before the discount
    d = decide(Rule(1, 10, min_price=D(1000)), D(1000), 30)
    assert d.new_price == 1429 and selling(D(1429), 30) >= 1000
    d = decide(Rule(1, 10, max_price=D(1000)), D(2000), 30)
    assert d.new_price == 1428 and selling(D(1428), 30) <= 1000


def test_slots_run_once_each_and_follow_the_rules_table():
    at = datetime(2026, 11, 30, 7, 10, tzinfo=UTC)
    due, cursor = repricer.plan_due([("c1", 6), ("c1", 24), ("c2", 6)], at, {}, busy={"c2"})
    assert [(d.cabinet_id, d.interval_hours, d.start.hour) for d in due] == [("c1", 6, 6), ("c1", 24, 0)]
    assert due[0].run_key == "repricer:c1:6h:2026-11-30T06:00Z"
    # the same slot again: nothing; c2 is no longer busy: it runs now
    due, cursor = repricer.plan_due([("c1", 6), ("c1", 24), ("c2", 6)], at, cursor, busy=set())
    assert [(d.cabinet_id, d.interval_hours) for d in due] == [("c2", 6)]
    # the next 6-hour slot; the 24-hour rule was removed; a new 2-hour interval appears and runs at once
    later = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    due, cursor = repricer.plan_due([("c1", 6), ("c1", 2)], later, cursor, busy=set())
    assert [(d.cabinet_id, d.interval_hours) for d in due] == [("c1", 2), ("c1", 6)]
    assert set(cursor) == {"c1:6", "c1:2"}


def test_bulk_items_are_checked_one_by_one():
    items = pricing_bulk.parse_items(
        [
            {"nm_id": 1, "price": 100},
            {"nm_id": 2, "discount": 10},
            {"nm_id": 1, "price": 120},
            {"nm_id": 3},
            {"nm_id": 4, "price": -5},
            {"nm_id": 5, "discount": 100},
            "x",
        ]
    )
    assert [i.error is None for i in items] == [True, True, False, False, False, False, False]
    assert items[2].error == "this product appears earlier in the request"


def _rules() -> list[autoreply.Rule]:
    return [
        autoreply.Rule(
            1,
            "feedback",
            max_rating=2,
            answer_template="{name}, нам жаль. Напишите нам.",
            complaint=True,
            complaint_reason="оскорбление",
            keywords=("ужас",),
        ),
        autoreply.Rule(2, "feedback", max_rating=3, answer_template="{name}, спасибо, разберёмся с {product}."),
        autoreply.Rule(3, "feedback", min_rating=4, answer_template="Спасибо, {name}!"),
        autoreply.Rule(4, "question", keywords=("размер",), answer_template="Размеры в карточке {product}."),
    ]


def _item(kind: str, rating: int | None, text: str) -> autoreply.Item:
    return autoreply.Item("i", kind, 7, rating, text, "Анна", "Футболка")


def test_replies_follow_the_first_matching_rule():
    rules = _rules()
    first = autoreply.choose(rules, _item("feedback", 1, "Ужас, а не товар"))
    assert first is not None and first.rule.id == 1 and first.complaint == "оскорбление"
    assert first.answer == "Анна, нам жаль. Напишите нам."
    low = autoreply.choose(rules, _item("feedback", 2, "маломерит"))
    assert low is not None and low.rule.id == 2 and low.complaint is None
    assert low.answer == "Анна, спасибо, разберёмся с Футболка."
    high = autoreply.choose(rules, _item("feedback", 5, ""))
    assert high is not None and high.answer == "Спасибо, Анна!"
    question = autoreply.choose(rules, _item("question", None, "Какой РАЗМЕР брать?"))
    assert question is not None and question.rule.id == 4
    assert autoreply.choose(rules, _item("question", None, "Когда поставка?")) is None


def test_a_feedback_or_question_wb_sends_with_only_its_id_matches_only_rules_that_ask_nothing_of_it():
    import msgspec

    from optima_pipelines.wb import Feedback, Question

    by_product = autoreply.Rule(1, "any", nm_ids=(7,), answer_template="Спасибо за отзыв о {product}")
    by_rating = autoreply.Rule(2, "any", min_rating=4, answer_template="Спасибо за оценку")
    catch_all = autoreply.Rule(3, "any", answer_template="Спасибо, {name}!")
    for wb_item in (
        msgspec.json.decode(b'{"id":"f1"}', type=Feedback),
        msgspec.json.decode(b'{"id":"q1"}', type=Question),
    ):
        item = autoreply.item_of(wb_item)
        assert (item.nm_id, item.rating, item.text, item.product_name, item.created_date) == (
            None,
            None,
            "",
            None,
            None,
        )
        reply = autoreply.choose([by_product, by_rating, catch_all], item)
        assert reply is not None and reply.rule is catch_all and reply.answer == "Спасибо, покупатель!"
