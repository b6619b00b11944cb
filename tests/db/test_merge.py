"""The staging merge: idempotent, change-aware, all-or-nothing."""

from datetime import date, datetime
from decimal import Decimal

import psycopg
import pytest

from optima_pipelines.load import merge_rows
from optima_pipelines.timeutil import MOSCOW

COLUMNS = ("cabinet_id", "srid", "day", "date", "last_change_date", "nm_id", "total_price", "is_cancel")
KEY = ("cabinet_id", "srid")


def order(srid: str, day: int, price: str = "100.10", cancel: bool = False, changed_hour: int = 12):
    ts = datetime(2026, 11, day, 10, 0, tzinfo=MOSCOW)
    return ("c1", srid, date(2026, 11, day), ts, ts.replace(hour=changed_hour), 42, Decimal(price), cancel)


def merge(conn, rows, run_id="r1"):
    with conn.transaction():
        return merge_rows(conn, "wb_orders", COLUMNS, KEY, rows, run_id=run_id)


def test_insert_then_rerun_changes_nothing(warehouse_conn):
    rows = [order("a", 1), order("b", 1), order("c", 2)]
    first = merge(warehouse_conn, rows)
    assert (first.inserted, first.updated, first.changed_days) == (3, 0, {date(2026, 11, 1), date(2026, 11, 2)})
    again = merge(warehouse_conn, rows, run_id="r2")
    assert (again.inserted, again.updated, again.changed_days) == (0, 0, set())
    # The untouched rows keep the run that wrote them.
    assert warehouse_conn.execute("SELECT DISTINCT run_id FROM wb_orders").fetchall() == [("r1",)]


def test_only_changed_rows_are_updated_and_their_days_reported(warehouse_conn):
    merge(warehouse_conn, [order("a", 1), order("b", 3)])
    result = merge(warehouse_conn, [order("a", 1), order("b", 3, cancel=True, changed_hour=18)], run_id="r2")
    assert (result.inserted, result.updated, result.changed_days) == (0, 1, {date(2026, 11, 3)})
    assert warehouse_conn.execute("SELECT is_cancel, run_id FROM wb_orders WHERE srid = 'b'").fetchone() == (True, "r2")


def test_a_row_whose_day_changes_reports_the_day_it_left_and_the_day_it_reached(warehouse_conn):
    merge(warehouse_conn, [order("a", 3), order("b", 3), order("c", 5)])
    # WB re-dates "a" one day earlier (a newer lastChangeDate); "c" comes back twice in the load, the
    # last time on the day it already has: it did not move.
    result = merge(
        warehouse_conn,
        [order("a", 2, changed_hour=18), order("c", 4, changed_hour=18), order("c", 5, changed_hour=19)],
        run_id="r2",
    )
    assert dict(result.left_by_day) == {date(2026, 11, 3): 1}
    assert dict(result.updated_by_day) == {date(2026, 11, 2): 1, date(2026, 11, 5): 1}
    assert result.changed_days == {date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 5)}
    again = merge(warehouse_conn, [order("a", 2, changed_hour=18)], run_id="r3")
    assert (again.changed_days, dict(again.left_by_day)) == (set(), {})


def test_money_keeps_every_kopeck(warehouse_conn):
    merge(warehouse_conn, [order("a", 1, price="1234567.89"), order("b", 1, price="0.01")])
    total = warehouse_conn.execute("SELECT sum(total_price) FROM wb_orders").fetchone()[0]
    assert total == Decimal("1234567.90")


def test_duplicate_keys_in_one_load_last_wins(warehouse_conn):
    result = merge(warehouse_conn, [order("a", 1, price="1"), order("a", 1, price="2")])
    assert result.inserted == 1
    assert warehouse_conn.execute("SELECT total_price FROM wb_orders").fetchone()[0] == Decimal("2")


def test_a_failure_midway_leaves_nothing(warehouse_conn):
    merge(warehouse_conn, [order("a", 1)])

    def rows():
        yield order("b", 2)
        yield order("c", 2)
        raise RuntimeError("connection lost while reading WB page")

    with pytest.raises(RuntimeError):
        merge(warehouse_conn, rows())
    assert warehouse_conn.execute("SELECT srid FROM wb_orders ORDER BY srid").fetchall() == [("a",)]


def test_bad_row_names_the_column_and_writes_nothing(warehouse_conn):
    bad = list(order("z", 4))
    bad[COLUMNS.index("nm_id")] = "not-a-number"
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="bigint"):
        merge(warehouse_conn, [order("y", 4), tuple(bad)])
    assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0


def test_a_large_load_of_a_new_cabinet_is_known_to_the_planner_at_once(warehouse_conn):
    """Right after a cabinet's first big load, queries over its rows are planned for thousands of
    rows, not for the empty cabinet the last statistics saw (a 71-s nested loop in the finance sync)."""

    def orders_of(cabinet: str, count: int) -> list[tuple]:
        return [(cabinet, f"{cabinet}-{n}", *order("x", 1 + n % 28)[2:]) for n in range(count)]

    merge(warehouse_conn, orders_of("c1", 6000))
    warehouse_conn.execute("ANALYZE wb_orders")  # the statistics know c1 only, as autovacuum left them
    merge(warehouse_conn, orders_of("c2", 6000))
    [[plan]] = warehouse_conn.execute(
        "EXPLAIN (FORMAT JSON) SELECT * FROM wb_orders WHERE cabinet_id = 'c2'"
    ).fetchone()
    assert plan["Plan"]["Plan Rows"] > 3000
