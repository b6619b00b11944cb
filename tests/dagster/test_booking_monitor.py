"""The slot-booking monitor against the WB simulator: a task is matched exactly once when a slot appears,
the match is in the audit trail, and WB's switched-off coefficients method never fails the monitor."""

from __future__ import annotations

import threading
from datetime import date, timedelta
from decimal import Decimal

import pytest
from dagster import build_sensor_context

from optima_pipelines.db.connection import connect
from optima_pipelines.definitions import RESOURCES
from optima_pipelines.engines import booking
from optima_pipelines.warehouse import cabinets
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from tests.wb_syncs import served, simulator
from wb_simulator import CabinetSpec
from wb_simulator.catalogs import WAREHOUSES

WH1, WH2 = WAREHOUSES[0][0], WAREHOUSES[1][0]


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    spec = {"products": 2, "orders_per_day": 2, "history_days": 2, "campaigns": 0}
    sim = simulator(CabinetSpec(id="c1", **spec), CabinetSpec(id="c2", **spec))
    today = sim.now().date()
    for wh in (WH1, WH2):  # every slot of the next days closed: none matches until a test opens one
        for n in range(14):
            sim.open_slot(wh, today + timedelta(days=n), coefficient=-1)
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def evaluate(instance):  # type: ignore[no-untyped-def]
    from optima_pipelines.sensors.booking import booking_slot_monitor

    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        result = booking_slot_monitor(context)
    assert not getattr(result, "run_requests", None)  # the monitor never launches a run
    return result


def add_task(conn, cabinet: str, first, last, *, max_coefficient: int = 1, box: int | None = 2) -> int:  # type: ignore[no-untyped-def]
    row = conn.execute(
        "INSERT INTO booking_tasks (cabinet_id, warehouse_ids, date_from, date_to, max_coefficient, box_type_id)"
        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (cabinet, [WH1, WH2], first, last, max_coefficient, box),
    ).fetchone()
    return int(row[0])


def task_row(conn, task_id: int):  # type: ignore[no-untyped-def]
    return conn.execute(
        "SELECT status, matched_at IS NOT NULL, last_checked_at IS NOT NULL, last_error FROM booking_tasks WHERE id = %s",
        (task_id,),
    ).fetchone()


def test_a_task_is_matched_exactly_once_when_a_slot_appears(wb, warehouse_conn, dagster_instance, settings):
    today = wb.now().date()
    # c1's token is refused (401): the poll falls back on the next cabinet's, c2.
    blob = TokenCipher(load_key(settings)).encrypt("not-a-token")
    warehouse_conn.execute("UPDATE cabinets SET wb_token_encrypted = %s WHERE id = 'c1'", (blob,))
    first, last = today + timedelta(days=2), today + timedelta(days=5)
    task = add_task(warehouse_conn, "c1", first, last)
    other = add_task(warehouse_conn, "c2", first, last, max_coefficient=0)
    past = add_task(warehouse_conn, "c1", today - timedelta(days=5), today - timedelta(days=1))

    evaluate(dagster_instance)
    assert task_row(warehouse_conn, task) == ("open", False, True, None)  # looked, nothing yet
    assert task_row(warehouse_conn, past)[0] == "expired"  # its dates are over
    # WB refused c1's own token: c1 is token_invalid and its task waits (kept open, not polled for).
    status = warehouse_conn.execute("SELECT status FROM cabinets WHERE id = 'c1'").fetchone()
    assert status == ("token_invalid",)
    wb.open_slot(WH2, first + timedelta(days=2), coefficient=1, box_type_id=2)
    assert str(evaluate(dagster_instance).skip_message).startswith("1 open task(s)")  # c2's only
    assert task_row(warehouse_conn, task)[:2] == ("open", False)

    # `cabinets set-token` brings c1 back: the slot that appeared meanwhile (second warehouse, two days
    # into the range, coefficient 1 for boxes) matches its task at the next tick.
    cabinets.set_token(warehouse_conn, TokenCipher(load_key(settings)), "c1", wb.token("c1"))
    assert "matched: ['task" in str(evaluate(dagster_instance).skip_message)
    assert task_row(warehouse_conn, task)[:2] == ("matched", True)
    assert task_row(warehouse_conn, other)[0] == "open"  # it accepts free acceptance only

    # Better slots later, more ticks: the task stays matched with its first slot, once.
    wb.open_slot(WH1, first, coefficient=0)
    evaluate(dagster_instance)
    evaluate(dagster_instance)
    matches = warehouse_conn.execute(
        "SELECT task_id, cabinet_id, warehouse_id, slot_date, box_type_id, coefficient, polled_with"
        " FROM booking_matches ORDER BY id"
    ).fetchall()
    assert matches == [
        (task, "c1", WH2, first + timedelta(days=2), 2, 1, "c1"),  # c1's turn: c2 asked last
        (other, "c2", WH1, first, 2, 0, "c2"),  # the free slot was the other task's
    ]
    assert booking.monitor_state(warehouse_conn).consecutive_errors == 0
    audit = warehouse_conn.execute(
        "SELECT cabinet_id, action, target, status, response->>'warehouse_id', reason FROM engine_actions"
        " WHERE engine = 'booking' ORDER BY id"
    ).fetchall()
    assert [a[:5] for a in audit] == [
        ("c1", "match_slot", f"task:{task}", "ok", str(WH2)),
        ("c2", "match_slot", f"task:{other}", "ok", str(WH1)),
    ]
    assert "open for acceptance (coefficient 1" in audit[0][5]


def test_two_monitors_seeing_the_same_slot_record_one_match(warehouse_conn, database_url, optima_env):
    today = date.today()
    warehouse_conn.execute("INSERT INTO cabinets (id, name) VALUES ('c1', 'C1')")
    task_id = add_task(warehouse_conn, "c1", today, today + timedelta(days=3))
    (task,) = [t for t in booking.open_tasks(warehouse_conn) if t.id == task_id]
    slot = booking.Slot(WH1, "wh", today + timedelta(days=1), 2, Decimal(0), True)
    barrier, results = threading.Barrier(4), []

    def monitor() -> None:
        with connect(database_url, f"optima_{optima_env}") as conn:
            barrier.wait()
            results.append(booking.record_match(conn, task, slot, polled_with="c1"))
            conn.commit()

    threads = [threading.Thread(target=monitor) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    assert warehouse_conn.execute("SELECT count(*) FROM booking_matches").fetchone()[0] == 1
    assert warehouse_conn.execute("SELECT count(*) FROM engine_actions WHERE engine = 'booking'").fetchone()[0] == 1


def test_a_switched_off_coefficients_method_is_recorded_and_retried_without_failing_the_monitor(
    wb, warehouse_conn, dagster_instance
):
    today = wb.now().date()
    task = add_task(warehouse_conn, "c1", today + timedelta(days=1), today + timedelta(days=3), box=None)
    wb.set_coefficients_disabled()
    wb.open_slot(WH1, today + timedelta(days=2), coefficient=0)
    for n in (1, 2):
        result = evaluate(dagster_instance)
        assert "unavailable" in result.skip_message and "next tick tries again" in result.skip_message
        state = booking.monitor_state(warehouse_conn)
        assert state.consecutive_errors == n and "disabled" in state.last_error
    status, matched, checked, error = task_row(warehouse_conn, task)
    assert (status, matched, checked) == ("open", False, True) and "disabled" in error  # the seller sees why

    wb.set_coefficients_disabled(False)  # WB turns it back on: the next tick matches
    evaluate(dagster_instance)
    assert task_row(warehouse_conn, task) == ("matched", True, True, None)
    state = booking.monitor_state(warehouse_conn)
    assert (state.consecutive_errors, state.last_error) == (0, None)
