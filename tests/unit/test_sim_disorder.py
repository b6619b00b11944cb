"""The simulator's disorder modes: each on its own does what real WB does, and off changes nothing."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import orjson
import pytest

from tests.sim_fixtures import NOW, served, small_sim
from wb_simulator import Disorder

REPORT = "/api/finance/v1/sales-reports/detailed"
FIRST, LAST = NOW.date() - timedelta(days=30), NOW.date()


def snapshot(sim) -> tuple:
    return (
        sim.truth.orders("c1"),
        sim.truth.sales("c1"),
        sim.truth.report_lines("c1", FIRST, LAST),
        sim.truth.day_totals("c1", NOW.date() - timedelta(days=3)),
    )


def test_disorder_off_is_the_tidy_world() -> None:
    assert snapshot(small_sim(disorder=Disorder())) == snapshot(small_sim())


def test_rates_are_checked() -> None:
    with pytest.raises(ValueError, match=r"Disorder\.short_pages must be a rate between 0 and 1"):
        Disorder(short_pages=1.5)
    with pytest.raises(ValueError, match="unknown disorder mode 'chaos'"):
        Disorder.only("chaos")


def test_late_orders_reach_the_report_before_the_orders_feed() -> None:
    sim = small_sim(disorder=Disorder.only("late_orders", 0.5))
    delivered = {o["srid"] for o in sim.truth.orders("c1")}
    lines = sim.truth.report_lines("c1", FIRST, LAST)
    early = {line["srid"] for line in lines if line["srid"] and line["srid"] not in delivered}
    assert early, "some report line references an order the feed has not delivered"
    sim.advance(timedelta(days=4))
    assert early <= {o["srid"] for o in sim.truth.orders("c1")}  # delivered later, days late


def cancellation_waits(sim) -> list[timedelta]:
    return [
        datetime.fromisoformat(o["cancelDate"]) - datetime.fromisoformat(o["date"])
        for o in sim.truth.orders("c1")
        if o["isCancel"]
    ]


def test_late_cancellations_come_weeks_after_the_order() -> None:
    assert max(cancellation_waits(small_sim(cancel_rate=0.3))) < timedelta(days=4)
    late = cancellation_waits(small_sim(cancel_rate=0.3, disorder=Disorder.only("late_cancellations", 0.5)))
    assert max(late) >= timedelta(days=8)


def test_foreign_returns_reference_orders_outside_every_window() -> None:
    sim = small_sim(disorder=Disorder.only("foreign_returns", 0.5))
    known = {o["srid"] for o in sim.truth.orders("c1")}
    foreign = [s for s in sim.truth.sales("c1") if s["srid"] not in known]
    assert foreign and all(s["saleID"].startswith("R") for s in foreign)
    lines = sim.truth.report_lines("c1", FIRST, LAST)
    returned = {line["srid"] for line in lines if line["docTypeName"] == "Возврат"}
    assert {s["srid"] for s in foreign if FIRST <= date.fromisoformat(s["date"][:10]) < LAST} <= returned
    # The sales feed serves them by their own recent date, though the order is 95-150 days old.
    for s in sim.truth.sales("c1"):
        if s["srid"] not in known:
            day = date.fromisoformat(s["date"][:10])
            assert s["saleID"] in {r["saleID"] for r in sim.truth.sales("c1", day)}


def test_service_lines_on_no_product_reference_an_order() -> None:
    sim = small_sim(disorder=Disorder.only("service_lines", 1.0))
    known = {o["srid"] for o in sim.truth.orders("c1")}
    service = [line for line in sim.truth.report_lines("c1", FIRST, LAST) if line["nmId"] == 0 and line["srid"]]
    assert {line["sellerOperName"] for line in service} == {"Штраф", "Логистика"}
    assert {line["srid"] for line in service} <= known


def read_report(wb, limit: int) -> tuple[list[int], list[dict]]:
    """Page the report the documented way (until 204), retrying a failed page; (statuses, lines)."""
    body = {"dateFrom": FIRST.isoformat(), "dateTo": LAST.isoformat(), "limit": limit, "period": "daily"}
    statuses, lines, rrd_id = [], [], 0
    while len(statuses) < 500:
        response = wb.post("finance", REPORT, {**body, "rrdId": rrd_id})
        statuses.append(response.status_code)
        if response.status_code == 204:
            break
        try:
            page = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            statuses[-1] = -1  # a truncated body
            continue
        if response.status_code != 200:
            continue
        lines.extend(page)
        rrd_id = page[-1]["rrdId"]
    return statuses, lines


def test_finance_pages_are_short_repeat_a_line_fail_and_end_only_with_204() -> None:
    sim = small_sim(time_scale=1e6, disorder=Disorder(short_pages=0.5, repeated_lines=0.5, page_failures=0.3))
    truth = sim.truth.report_lines("c1", FIRST, LAST)
    with served(sim) as (_, wb):
        statuses, lines = read_report(wb, limit=200)
    assert statuses[-1] == 204 and 204 not in statuses[:-1]
    assert {s for s in statuses if s >= 500} and -1 in statuses  # 5xx and truncated JSON after page 1
    ids = [line["rrdId"] for line in lines]
    assert len(ids) > len(set(ids))  # the same line on two pages
    assert sorted(set(ids)) == [line["rrdId"] for line in truth]  # nothing lost once paged to the 204
    ledger = sim.ledgers["c1"]
    assert ledger.pages is not None and ledger.pages.served == set(ids)
    # Short pages that were not the last: fewer lines than the limit, and more came after.
    assert len(truth) < 200 * (statuses.count(200) - 1)


def day_of(row: dict) -> date:
    return date.fromisoformat(row["date"][:10])


@pytest.mark.parametrize("feed", ["orders", "sales"])
def test_redated_rows_come_back_a_day_earlier_with_a_newer_last_change(feed: str) -> None:
    sim = small_sim(disorder=Disorder.only(f"redated_{feed}", 0.3))
    key = "srid" if feed == "orders" else "saleID"
    rows = getattr(sim.truth, feed)
    before = {r[key]: r for r in rows("c1")}
    sim.advance(timedelta(hours=30))
    after = {r[key]: r for r in rows("c1")}
    moved = [k for k in before if k in after and day_of(after[k]) != day_of(before[k])]
    assert moved, f"some {feed} row was re-dated within 30 hours"
    for k in moved:
        assert day_of(after[k]) == day_of(before[k]) - timedelta(days=1)
        assert after[k]["lastChangeDate"] > before[k]["lastChangeDate"]
        # flag=1 serves it on its new day only.
        assert k in {r[key] for r in rows("c1", day_of(after[k]))}
        assert k not in {r[key] for r in rows("c1", day_of(before[k]))}


def test_a_revised_ad_day_drops_the_other_apps_rows_and_keeps_its_total() -> None:
    sim = small_sim(disorder=Disorder.only("revised_ad_days", 1.0))
    yesterday = sim.today()
    now = sim.now()
    sim.advance(datetime.combine(yesterday + timedelta(days=1), datetime.min.time(), now.tzinfo) - now)
    before = sim.truth.ad_stats("c1", yesterday)  # the day has just ended: not revised yet
    sim.advance(timedelta(hours=48))
    after = sim.truth.ad_stats("c1", yesterday)
    assert before and set(after) == set(before)
    for advert, day in after.items():
        assert [app["appType"] for app in day["apps"]] == [1]
        assert day["sum"] == before[advert]["sum"] and day["orders"] == before[advert]["orders"]
    assert any(len(day["apps"]) > 1 for day in before.values())
