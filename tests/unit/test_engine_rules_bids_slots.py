"""The engines' rules as a seller reads them: the autobidder's bid decision and the booking slot match."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from optima_pipelines.engines.autobidder import Evidence, Rule, RuleView, decide
from optima_pipelines.engines.booking import Slot, Task, find_slot, next_poller

CPO = Rule("target_cpo", Decimal(100), min_bid=15_000, max_bid=40_000, max_step_percent=Decimal(20))
DRR = Rule("target_drr", Decimal(10), min_bid=200, max_bid=1_000, max_step_percent=Decimal(50))


def ev(spend: float, orders: int, revenue: float = 0, last_day: float = 0) -> Evidence:
    return Evidence(Decimal(str(spend)), orders, Decimal(str(revenue)), Decimal(str(last_day)))


def test_cpo_over_target_lowers_the_bid_in_proportion_to_the_gap():
    d = decide(CPO, 20_000, ev(1250, 10))  # CPO 125 ₽ vs 100 ₽: half-way to × 100/125, i.e. -10 %
    assert (d.kind, d.bid) == ("lower", 18_000)
    assert "CPO 125.00 ₽ is above the target 100.00 ₽: 20000 → 18000 kopecks" in d.reason


def test_a_big_gap_moves_the_bid_by_the_largest_step_only():
    assert decide(CPO, 20_000, ev(5000, 10)).bid == 16_000  # CPO 500 ₽: -20 %, not ÷5
    assert decide(CPO, 20_000, ev(100, 10)).bid == 24_000  # CPO 10 ₽: +20 %, not ×10


def test_within_the_tolerance_the_bid_is_kept():
    d = decide(CPO, 20_000, ev(1040, 10))
    assert (d.kind, d.bid) == ("hold", 20_000) and "within 5" in d.reason


def test_the_bid_never_leaves_the_bounds_nor_goes_under_wbs_minimum():
    assert decide(CPO, 16_000, ev(5000, 10)).bid == 15_000  # the rule's minimum
    assert decide(CPO, 38_000, ev(100, 10)).bid == 40_000  # the rule's maximum
    assert decide(CPO, 17_000, ev(5000, 10), wb_min=16_500).bid == 16_500  # WB's minimum wins over the rule's
    at_max = decide(CPO, 40_000, ev(100, 10))
    assert (at_max.kind, at_max.bid) == ("hold", 40_000) and "already at its maximum" in at_max.reason
    rng = random.Random(7)
    for _ in range(2000):
        bid, wb_min = rng.randint(1, 80_000), rng.choice([None, 14_000, 17_000])
        d = decide(CPO, bid, ev(round(rng.uniform(0, 5000), 2), rng.randint(0, 50)), wb_min=wb_min)
        assert max(15_000, wb_min or 0) <= d.bid <= 40_000, (bid, wb_min, d)


def test_a_bid_outside_the_bounds_is_brought_back_even_without_statistics():
    d = decide(CPO, 50_000, None)
    assert (d.kind, d.bid) == ("clamp", 40_000)


def test_spend_without_orders_lowers_once_it_exceeds_one_target_cpo():
    assert decide(CPO, 20_000, ev(50, 0)).kind == "hold"  # 50 ₽ spent, no order yet: too early
    d = decide(CPO, 20_000, ev(150, 0))
    assert (d.kind, d.bid) == ("lower", 16_000) and "no ad order" in d.reason
    assert decide(CPO, 20_000, ev(0, 0)).kind == "hold"


def test_drr_is_spend_over_the_value_of_ad_orders():
    d = decide(DRR, 400, ev(50, 3, revenue=1000))  # ДРР 5 % vs 10 %: raise, at most +50 %
    assert (d.kind, d.bid) == ("raise", 600) and "ДРР 5.0 % is below the target 10.0 %" in d.reason
    assert decide(DRR, 400, ev(150, 3, revenue=1000)).bid == 333  # 15 %: half-way to × 10/15


def test_raising_stops_at_the_daily_budget():
    rule = replace(CPO, daily_budget_rub=Decimal(500))
    d = decide(rule, 20_000, ev(300, 10, last_day=600))
    assert (d.kind, d.bid) == ("hold", 20_000) and "daily budget" in d.reason
    assert decide(rule, 20_000, ev(300, 10, last_day=100)).kind == "raise"


def test_a_wb_minimum_above_the_rules_maximum_blocks_the_rule():
    d = decide(CPO, 20_000, ev(5000, 10), wb_min=45_000)
    assert (d.kind, d.bid) == ("blocked", 20_000)


def view(**changes) -> RuleView:  # type: ignore[no-untyped-def]
    now = datetime(2026, 8, 20, 12, tzinfo=UTC)
    base = RuleView(
        id=1,
        cabinet_id="c1",
        advert_id=5,
        nm_id=7,
        placement="search",
        payment_type="cpm",
        rule=CPO,
        min_change_interval=timedelta(minutes=60),
        current_bid=20_000,
        evidence=ev(1500, 10),
        stats_loaded_at=now - timedelta(minutes=1),
        decided_stats_at=None,
        set_at=None,
        wb_min=None,
        wb_min_checked_at=None,
    )
    return replace(base, **changes)


def test_a_rule_acts_once_per_new_statistics_and_not_more_often_than_its_interval():
    now = datetime(2026, 8, 20, 12, tzinfo=UTC)
    assert view().wants(now) is not None
    seen = now - timedelta(minutes=1)
    assert view(decided_stats_at=seen).wants(now) is None  # the same numbers: decided already
    assert view(set_at=now - timedelta(minutes=10)).wants(now) is None  # changed 10 min ago
    assert view(set_at=now - timedelta(minutes=61)).wants(now) is not None
    assert view(current_bid=None).wants(now) is None  # the campaign's bids are not synced yet
    # Out of bounds: brought back whatever the statistics and the interval.
    assert view(current_bid=90_000, decided_stats_at=seen, set_at=now).wants(now).bid == 40_000  # type: ignore[union-attr]
    # Unless WB refused the rule's last bid on these statistics: it waits for new ones.
    assert view(current_bid=90_000, refused=True).wants(now) is None


TASK = Task(1, "c1", (507, 117986), date(2026, 8, 21), date(2026, 8, 25), Decimal(1), 2)


def slot(wh: int = 507, day: int = 22, coef: int = 0, box: int | None = 2, unload: bool = True) -> Slot:
    return Slot(wh, f"wh{wh}", date(2026, 8, day), box, Decimal(coef), unload)


@pytest.mark.parametrize(
    "candidate",
    [
        slot(wh=1733),  # another warehouse
        slot(day=20),  # before the range
        slot(day=26),  # after it
        slot(box=5),  # monopallets, the task wants boxes
        slot(coef=2),  # too expensive
        slot(coef=-1),  # closed
        slot(unload=False),  # unloading not allowed
    ],
)
def test_a_slot_outside_the_task_does_not_match(candidate):
    assert find_slot(TASK, [candidate]) is None


def test_the_earliest_then_cheapest_then_first_listed_warehouse_wins():
    assert find_slot(TASK, [slot(day=24), slot(day=22, coef=1)]) == slot(day=22, coef=1)
    assert find_slot(TASK, [slot(day=22, coef=1), slot(day=22, coef=0, wh=117986)]) == slot(day=22, wh=117986)
    assert find_slot(TASK, [slot(wh=117986), slot(wh=507)]) == slot(wh=507)
    assert find_slot(replace(TASK, box_type_id=None), [slot(box=5)]) == slot(box=5)


def test_the_poll_token_goes_round_the_cabinets_with_tasks():
    assert next_poller(["b", "a", "c", "a"], None) == ["a", "b", "c"]
    assert next_poller(["a", "b", "c"], "a") == ["b", "c", "a"]
    assert next_poller(["a", "b", "c"], "c") == ["a", "b", "c"]
    assert next_poller([], "a") == []


def test_a_slot_wb_sends_without_its_coefficient_or_unload_flag_is_never_booked():
    import msgspec

    from optima_pipelines.wb import AcceptanceCoefficient

    any_box = Task(2, "c1", (507,), date(2026, 8, 21), date(2026, 8, 25), Decimal(5), None)
    bare = msgspec.json.decode(b'{"date":"2026-08-22T00:00:00Z","warehouseID":507}', type=AcceptanceCoefficient)
    closed = Slot.of(bare)
    assert (closed.coefficient, closed.allow_unload, closed.warehouse_name) == (Decimal(-1), False, "")
    assert find_slot(any_box, [closed]) is None
    unloading = Slot.of(
        msgspec.json.decode(
            b'{"date":"2026-08-22T00:00:00Z","warehouseID":507,"allowUnload":true}', type=AcceptanceCoefficient
        )
    )
    assert find_slot(any_box, [unloading]) is None  # still closed: no coefficient
