"""The pure decisions of the РНП re-aggregation: how the due pairs are widened and batched into runs."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest

from optima_pipelines.errors import InvalidInput
from optima_pipelines.mart.plan import (
    Recompute,
    day_ranges,
    parse_cursor,
    plan_recomputes,
)
from optima_pipelines.sensors.rnp import run_request

D = date(2026, 11, 20)
FIRST, LAST = date(2025, 1, 1), date(2026, 11, 30)


def d(n: int) -> date:
    return D + timedelta(days=n)


def test_day_ranges():
    assert day_ranges([d(3), d(1), d(2), d(7), d(2)]) == [(d(1), d(3)), (d(7), d(7))]
    assert day_ranges([]) == []


def test_a_90_day_import_is_one_run():
    demands = {("c1", d(-n)): {"rnp_sales"} for n in range(90)}
    assert plan_recomputes(demands, ["c1"]) == [Recompute(("c1",), d(-89), D, ("rnp_sales",))]


def test_a_cancellation_20_days_back_recomputes_that_day_only():
    plan = plan_recomputes({("c1", d(-20)): {"rnp_sales"}}, ["c0", "c1", "c2"])
    assert plan == [Recompute(("c1",), d(-20), d(-20), ("rnp_sales",))]
    assert plan[0].pairs() == [("c1", d(-20))]


def test_cabinets_with_the_same_days_share_a_run_when_adjacent():
    demands = {(c, day): {"rnp_ads"} for c in ("a", "b", "c", "e") for day in (D, d(-1))}
    plan = plan_recomputes(demands, ["a", "b", "c", "d", "e"])
    # d has nothing to do, so e cannot join a..c: a rectangle covers every cabinet between its ends.
    assert plan == [
        Recompute(("a", "b", "c"), d(-1), D, ("rnp_ads",)),
        Recompute(("e",), d(-1), D, ("rnp_ads",)),
    ]


def test_rollups_with_the_same_days_share_a_run_and_others_do_not():
    demands = {("c1", d(-n)): {"rnp_sales"} for n in range(10)}
    demands[("c1", d(-5))] = {"rnp_sales", "rnp_ads"}
    demands[("c1", d(-30))] = set()  # a stock snapshot: the merge alone
    plan = plan_recomputes(demands, ["c1"])
    assert plan == [
        Recompute(("c1",), d(-30), d(-30), ()),
        Recompute(("c1",), d(-9), D, ("rnp_sales",)),
        Recompute(("c1",), d(-5), d(-5), ("rnp_ads",)),
    ]
    assert [r.asset_keys for r in plan] == [["rnp_daily"], ["rnp_sales", "rnp_daily"], ["rnp_ads", "rnp_daily"]]


def test_big_rectangles_are_split_into_bounded_runs():
    demands = {(c, d(-n)): {"rnp_sales"} for c in ("a", "b", "c") for n in range(10)}
    plan = plan_recomputes(demands, ["a", "b", "c"], max_partitions=20)
    assert all(r.partitions <= 20 for r in plan)
    assert sorted(p for r in plan for p in r.pairs()) == sorted(demands)
    long = plan_recomputes({("a", d(-n)): {"rnp_sales"} for n in range(50)}, ["a"], max_partitions=20)
    assert [(r.start, r.end) for r in long] == [(d(-49), d(-30)), (d(-29), d(-10)), (d(-9), D)]


def test_batching_recomputes_exactly_what_was_demanded():
    """Random demands: every (rollup, cabinet, day) demanded is in exactly the runs that cover it, the
    merge covers every demanded partition, and nothing else is recomputed."""
    rng = random.Random(7)
    cabinets = [f"c{i}" for i in range(12)]
    for _ in range(200):
        demands: dict[tuple[str, date], set[str]] = {}
        for _ in range(rng.randint(1, 60)):
            pair = (rng.choice(cabinets), d(-rng.randint(0, 40)))
            demands.setdefault(pair, set()).update(
                rng.sample(["rnp_sales", "rnp_ads", "rnp_finance"], rng.randint(0, 2))
            )
        order = rng.sample(cabinets, len(cabinets))
        max_partitions = rng.choice([5, 50, 400])
        plan = plan_recomputes(demands, order[: rng.randint(0, 12)], max_partitions=max_partitions)
        done: dict[tuple[str, date], set[str]] = {}
        for r in plan:
            assert r.partitions <= max_partitions
            for pair in r.pairs():
                done.setdefault(pair, set()).update([*r.rollups, "rnp_daily"])
        assert done == {pair: {*rollups, "rnp_daily"} for pair, rollups in demands.items()}


def test_run_requests_carry_the_rectangle():
    single = run_request(Recompute(("c1",), D, D, ("rnp_sales",)), {"optima/queue": "re-aggregate"}, "k1")
    assert single.partition_key == "c1|2026-11-20"
    assert [k.to_user_string() for k in single.asset_selection or []] == ["rnp_sales", "rnp_daily"]
    ranged = run_request(Recompute(("a", "b"), d(-2), D, ()), {"optima/queue": "re-aggregate"}, "k2")
    assert ranged.partition_key is None
    assert ranged.tags["dagster/asset_partition_range_start"] == "a|2026-11-18"
    assert ranged.tags["dagster/asset_partition_range_end"] == "b|2026-11-20"
    assert ranged.tags["optima/queue"] == "re-aggregate"


def test_the_cursor_is_read_and_a_bad_one_is_named():
    assert parse_cursor(None) == {}
    assert parse_cursor('{"planned_at": 12}') == {"planned_at": 12}
    # An earlier version's cursor (the last event read per feed) reads as one that never planned.
    assert "planned_at" not in parse_cursor('{"wb_orders": 12}')
    with pytest.raises(InvalidInput, match="clear it in the UI"):
        parse_cursor("12")


@pytest.mark.parametrize(
    "module", ["optima_pipelines.mart.plan", "optima_pipelines.mart.recompute", "optima_pipelines.mart.checks"]
)
def test_the_mart_imports_no_dagster(module: str) -> None:
    """The mart (its planner, recompute and checks) is Dagster-free (issues 16 and 35): it can be
    reasoned about and tested without Dagster; assets/rnp.py and sensors/rnp.py are its shell."""
    import subprocess
    import sys

    code = f"import sys, {module}; sys.exit('dagster' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_runs_are_sized_by_the_cabinets_products():
    """A sweep's window: 1,000 cabinets of ten products × 3 days is one run; the same cabinets of
    unknown size (counted as DEFAULT_PRODUCTS) are split as big cabinets are; one big cabinet's 90
    days stay one run."""
    cabinets = [f"c{i:04d}" for i in range(1000)]
    demands = {(c, day): {"rnp_ads"} for c in cabinets for day in (d(-2), d(-1), D)}
    small = plan_recomputes(demands, cabinets, products=dict.fromkeys(cabinets, 10))
    assert small == [Recompute(tuple(cabinets), d(-2), D, ("rnp_ads",))]
    unknown = plan_recomputes(demands, cabinets)
    assert len(unknown) == 8 and all(r.partitions <= 400 for r in unknown)
    assert sorted(p for r in unknown for p in r.pairs()) == sorted(demands)
    big = {("b", d(-n)): {"rnp_sales"} for n in range(90)}
    assert plan_recomputes(big, ["b"], products={"b": 5000}) == [Recompute(("b",), d(-89), D, ("rnp_sales",))]
    mixed = plan_recomputes(demands, cabinets, products={**dict.fromkeys(cabinets, 10), "c0500": 5000})
    assert all(sum(10 if c != "c0500" else 5000 for c in r.cabinets) * r.days <= 2_000_000 for r in mixed)
    assert sorted(p for r in mixed for p in r.pairs()) == sorted(demands)


def test_a_windows_mixed_changes_are_widened_into_one_run_and_an_import_stays_exact():
    """What a sweep window leaves: ads on three days for most cabinets, today's orders for some, a
    stock snapshot for others, and a few without changes between them: widened, one rectangle (the
    recompute skips the pairs whose feeds did not change); a 90-day import keeps its own run."""
    from optima_pipelines.mart.plan import widen

    cabinets = [f"c{i:04d}" for i in range(1000)]
    demands: dict[tuple[str, date], set[str]] = {}
    for i, c in enumerate(cabinets):
        if i % 7 == 3:
            continue  # nothing changed for this one
        for day in (d(-2), d(-1), D):
            demands[(c, day)] = {"rnp_ads"} if i % 3 else set()
        if i % 2:
            demands[(c, D)].add("rnp_sales")
    sizes = dict.fromkeys(cabinets, 10)
    exact = plan_recomputes(demands, cabinets, products=sizes)
    assert len(exact) > 100  # planned exactly, the mix fragments the rectangles
    wide = plan_recomputes(widen(demands, cabinets), cabinets, products=sizes)
    assert wide == [Recompute(tuple(cabinets), d(-2), D, ("rnp_sales", "rnp_ads"))]
    # Everything demanded is covered.
    covered = {(p, r) for run in wide for p in run.pairs() for r in run.rollups}
    assert all((pair, r) in covered for pair, wanted in demands.items() for r in wanted)

    demands[("c0500", d(-89))] = {"rnp_sales"}  # an import reaching 90 days back: not widened
    with_import = plan_recomputes(widen(demands, cabinets), cabinets, products=sizes)
    assert Recompute(("c0500",), d(-89), d(-89), ("rnp_sales",)) in with_import
    assert all(r.days <= 3 for r in with_import if r.start != d(-89))


def test_a_windows_different_short_spans_become_one_rectangle_a_long_one_does_not():
    """Ads of today for some cabinets, an increment's last four days for others: one span over both
    (one run, not one per span); a cabinet whose own days span more than a week is planned exactly."""
    from optima_pipelines.mart.plan import widen

    cabinets = [f"c{i}" for i in range(6)]
    demands: dict[tuple[str, date], set[str]] = {(c, D): {"rnp_ads"} for c in cabinets[:3]}
    demands |= {(c, d(-n)): {"rnp_sales"} for c in cabinets[3:] for n in range(4)}
    assert plan_recomputes(widen(demands, cabinets), cabinets) == [
        Recompute(tuple(cabinets), d(-3), D, ("rnp_sales", "rnp_ads"))
    ]
    demands[("c5", d(-8))] = {"rnp_sales"}  # c5's own span is now long: planned exactly
    plan = plan_recomputes(widen(demands, cabinets), cabinets)
    assert Recompute(("c5",), d(-8), d(-8), ("rnp_sales",)) in plan
    assert Recompute(tuple(cabinets[:5]), d(-3), D, ("rnp_sales", "rnp_ads")) in plan
