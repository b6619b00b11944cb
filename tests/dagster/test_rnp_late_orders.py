"""A report line synced before its source order: the order's arrival re-places the line in the РНП.

Through the real syncs (against the WB simulator), the real re-aggregation sensor and the nightly
merge: the payout of every day equals an independent computation from the raw tables (a line
belongs to its order's day, else its own), and the rnp_daily asset checks pass.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

import pytest
from dagster import SkipReason, build_sensor_context

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor
from optima_pipelines.timeutil import today_moscow
from tests.dagster.test_rnp_checks import evaluations
from tests.dagster.test_rnp_merge_sync import nightly as nightly_requests
from tests.rnp_feeds import due_days, execute_request, run_range
from tests.wb_syncs import run_job, served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=12, orders_per_day=50, history_days=40, campaigns=1))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


class Reaggregation:
    """The re-aggregation sensor's ticks, with its cursor, as the daemon evaluates them."""

    def __init__(self, instance):  # type: ignore[no-untyped-def]
        self.instance = instance
        self.cursor: str | None = None

    def tick(self, *, run: bool = True) -> int:
        """One tick; runs what it requests (``run=False``: the requests are lost). Returns their number."""
        with build_sensor_context(instance=self.instance, cursor=self.cursor, resources=RESOURCES) as context:
            result = rnp_reaggregate_sensor(context)
        if isinstance(result, SkipReason):
            return 0
        self.cursor = result.cursor
        requests = result.run_requests or []
        for request in requests if run else []:
            execute_request(self.instance, request)
        return len(requests)


def expected_payout(conn) -> dict[date, Decimal]:  # type: ignore[no-untyped-def]
    """Per Moscow day, the signed for_pay of the lines placed there, computed here from the raw tables."""
    order_day = dict(conn.execute("SELECT srid, day FROM wb_orders WHERE cabinet_id = 'c1'").fetchall())
    payout: dict[date, Decimal] = defaultdict(Decimal)
    for own_day, srid, doc_type, for_pay in conn.execute(
        "SELECT day, srid, doc_type_name, for_pay FROM wb_report_lines WHERE cabinet_id = 'c1'"
    ).fetchall():
        payout[order_day.get(srid, own_day)] += (-1 if doc_type == "Возврат" else 1) * (for_pay or 0)
    return dict(payout)


def assert_payout_right_every_day(conn, instance, *, only_check: str | None = None) -> None:  # type: ignore[no-untyped-def]
    expected = expected_payout(conn)
    mart = dict(conn.execute("SELECT day, sum(payout) FROM rnp_daily WHERE cabinet_id = 'c1' GROUP BY day").fetchall())
    days = sorted(set(expected) | set(mart))
    wrong = {d: (mart.get(d, 0), expected.get(d, 0)) for d in days if mart.get(d, 0) != expected.get(d, 0)}
    assert not wrong, f"day: (rnp_daily payout, lines placed there) {wrong}"
    checks = evaluations(run_range(instance, f"c1|{days[0]}", f"c1|{days[-1]}", job="rnp_daily_check"))
    failed = {k: e.description for k, e in checks.items() if not e.passed and only_check in (None, k[0])}
    assert checks and not failed, failed


def moved_lines(conn) -> int:  # type: ignore[no-untyped-def]
    """Lines whose order's day is not their own day (the lines this file is about)."""
    (n,) = conn.execute(
        "SELECT count(*) FROM wb_report_lines l JOIN wb_orders o USING (cabinet_id, srid) WHERE o.day <> l.day"
    ).fetchone()
    return int(n)


def test_lines_synced_before_their_orders_move_to_the_orders_days(wb, warehouse_conn, dagster_instance):
    sensor = Reaggregation(dagster_instance)
    # A new cabinet's first finance sync runs before its orders arrive: every line is on its own day.
    assert run_job("finance_sync", dagster_instance, "c1").success
    assert sensor.tick() > 0
    assert_payout_right_every_day(warehouse_conn, dagster_instance)

    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert moved_lines(warehouse_conn) > 100  # sales are paid days after the order
    # The days the lines leave and the orders' days they reach are due for the finance rollup.
    moves = warehouse_conn.execute(
        "SELECT DISTINCT l.day, o.day FROM wb_report_lines l JOIN wb_orders o USING (cabinet_id, srid)"
        " WHERE o.day <> l.day"
    ).fetchall()
    assert {d for move in moves for d in move} <= due_days(warehouse_conn, "c1", "rnp_finance")
    assert sensor.tick() > 0
    assert_payout_right_every_day(warehouse_conn, dagster_instance)

    # Nothing is counted twice by a later recompute of the orders' days (the nightly one, say).
    first, last = min(expected_payout(warehouse_conn)), today_moscow()
    run_range(dagster_instance, f"c1|{first}", f"c1|{last}")
    assert_payout_right_every_day(warehouse_conn, dagster_instance)


def test_the_nightly_merge_re_places_the_lines_of_its_days_when_the_sensor_missed_their_orders(
    wb, warehouse_conn, dagster_instance, database_url, optima_env
):
    sensor = Reaggregation(dagster_instance)
    today = today_moscow()
    yesterday = today - timedelta(days=1)
    assert run_job("digitization_increment", dagster_instance, "c1").success
    # Orders placed before the nightly window whose report lines are all of the window's days (the
    # nightly re-places the lines of its days): WB's feed has not delivered them when the report is synced.
    window_first = today - timedelta(days=2)
    lines = wb.truth.report_lines("c1", today - timedelta(days=30), yesterday)
    outside = {line["srid"] for line in lines if line["rrDate"][:10] < window_first.isoformat()}
    paid_in_window = sorted({line["srid"] for line in lines} - outside)
    late = [
        srid
        for (srid,) in warehouse_conn.execute(
            "SELECT srid FROM wb_orders WHERE cabinet_id = 'c1' AND day < %s AND srid = ANY(%s)",
            (window_first, paid_in_window),
        ).fetchall()
    ]
    assert len(late) > 5
    warehouse_conn.execute("DELETE FROM wb_orders WHERE cabinet_id = 'c1' AND srid = ANY(%s)", (late,))
    assert sensor.tick() > 0
    assert run_job("finance_sync", dagster_instance, "c1").success
    assert sensor.tick() > 0
    assert_payout_right_every_day(warehouse_conn, dagster_instance)  # yesterday's lines on yesterday

    # The orders arrive (the increment reads WB's whole feed again), and the sensor's runs are lost.
    warehouse_conn.execute("DELETE FROM sync_state WHERE cabinet_id = 'c1' AND feed = 'orders'")
    assert run_job("digitization_increment", dagster_instance, "c1").success
    assert sensor.tick(run=False) > 0

    nightly = nightly_requests(dagster_instance, database_url, optima_env, today)
    for request in nightly:
        execute_request(dagster_instance, request)
    # The orders' own days outside the window are due too: the night recomputes them with the window,
    # and every check of every day passes.
    assert_payout_right_every_day(warehouse_conn, dagster_instance)
