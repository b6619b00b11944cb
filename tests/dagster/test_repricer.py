"""repricer-schedule against the simulator: rules move WB's prices where they say, once per slot, audited."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from dagster import SkipReason

from optima_pipelines.engines.repricer import Rule, decide
from optima_pipelines.sensors.repricer import repricer_sensor
from tests.engines import evaluate, execute, fast_retries, selling_at_wb, writes
from tests.wb_syncs import served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    fast_retries(monkeypatch)
    sim = simulator(CabinetSpec(id="c1", products=8, orders_per_day=5, history_days=3, campaigns=0))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def selling(price: int, discount: int) -> Decimal:
    return Decimal(price) * (100 - discount) / 100


def test_rules_move_wb_prices_to_where_they_say_once_per_slot(wb, warehouse_conn, dagster_instance):
    before = selling_at_wb(wb, "c1")
    a, b, c, d, e = sorted(before)[:5]
    sell = {nm: selling(*before[nm]) for nm in before}
    rules = {
        a: {"target_price": (sell[a] * Decimal("0.8")).quantize(Decimal(1))},  # follow a target
        b: {"cost": sell[b], "min_margin_pct": 20},  # margin 20 % on a cost equal to today's price
        c: {"target_price": (sell[c] / 10).quantize(Decimal(1))},  # a cut WB would quarantine
        d: {"max_price": (sell[d] * Decimal("0.9")).quantize(Decimal(1))},  # ceiling
        e: {"min_price": (sell[e] / 2).quantize(Decimal(1)), "max_price": sell[e] * 2},  # already fine
    }
    for nm, rule in rules.items():
        columns = ", ".join(["cabinet_id", "nm_id", "interval_hours", *rule])
        marks = ", ".join(["%s"] * (3 + len(rule)))
        warehouse_conn.execute(
            f"INSERT INTO repricer_rules ({columns}) VALUES ({marks})", ("c1", nm, 6, *rule.values())
        )

    result, _ = evaluate(repricer_sensor, dagster_instance)
    (run_request,) = result.run_requests
    # One sweep over the due slots: here c1's 6-hour rules alone.
    assert run_request.job_name == "repricer_sweep" and "optima/cabinet" not in run_request.tags
    (slot,) = run_request.run_config["ops"]["repricer_sweep_op"]["config"]["slots"]
    assert slot.startswith("c1|6|")
    started = time.monotonic()
    assert execute(run_request, dagster_instance).success
    elapsed = time.monotonic() - started

    after = selling_at_wb(wb, "c1")
    new = {nm: selling(*after[nm]) for nm in after}
    assert all(after[nm][1] == before[nm][1] for nm in after), "the seller's discount is kept"
    assert rules[a]["target_price"] <= new[a] < rules[a]["target_price"] + 1
    assert new[b] >= sell[b] / Decimal("0.8") and (new[b] - sell[b]) / new[b] >= Decimal("0.2")
    assert new[c] == sell[c] / 2, "a cut to a tenth goes half way this run: WB never quarantines it"
    assert rules[d]["max_price"] - 1 < new[d] <= rules[d]["max_price"]
    assert after[e] == before[e]
    # Exactly what the pure rules say, for every product.
    for nm, rule in rules.items():
        expected = decide(
            Rule(0, nm, **{k: Decimal(str(v)) for k, v in rule.items()}), Decimal(before[nm][0]), before[nm][1]
        )
        assert after[nm][0] == (expected.new_price or before[nm][0]), nm

    outcomes = dict(
        warehouse_conn.execute("SELECT nm_id, outcome FROM repricer_outcomes WHERE cabinet_id = 'c1'").fetchall()
    )
    assert outcomes == {a: "applied", b: "applied", c: "applied", d: "applied"}
    (action,) = warehouse_conn.execute(
        "SELECT engine, action, status, response->>'status', request->>'items' FROM engine_actions"
    ).fetchall()
    assert action == ("repricer", "upload_prices", "ok", "3", "4")
    (sent,) = warehouse_conn.execute("SELECT request->'data' FROM engine_actions").fetchone()
    why = {item["nmID"]: item["why"] for item in sent}
    assert "target" in why[a] and "margin on cost" in why[b] and "WB quarantines" in why[c] and "capped" in why[d]
    assert len(writes(wb, "price_task")) == 1

    # The same slot again (a retry, a second tick): nothing is sent twice.
    assert execute(run_request, dagster_instance).success
    assert len(writes(wb, "price_task")) == 1
    assert json.loads(result.cursor) == {"c1:6": run_request.tags["optima/window"]}
    again, _ = evaluate(repricer_sensor, dagster_instance, cursor=result.cursor)
    assert isinstance(again, SkipReason)
    assert elapsed < 10
