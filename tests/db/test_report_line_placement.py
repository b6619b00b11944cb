"""Where the РНП places a finance-report line: ``wb_report_lines.attributed_day`` (migration 0015).

A line belongs to its source order's day (the wb_orders row with its srid), else to its own day,
whatever order WB delivers them in, and whoever writes them. The triggers that keep the column also
count the move on the watermarks of both days, so the recompute does not skip them.
"""

from __future__ import annotations

import threading
import time
from datetime import date

import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from tests.rnp_feeds import add_order, add_report_line, days_ago

C = "c1"
LINE_DAY = days_ago(2)
ORDER_DAY = days_ago(9)


def placed(conn: psycopg.Connection) -> dict[int, date]:
    rows = conn.execute("SELECT rrd_id, attributed_day FROM wb_report_lines ORDER BY rrd_id").fetchall()
    return dict(rows)


def finance_changes(conn: psycopg.Connection) -> dict[date, int]:
    rows = conn.execute(
        "SELECT day, changes FROM rnp_watermarks WHERE cabinet_id = %s AND table_name = 'rnp_finance'", (C,)
    ).fetchall()
    return dict(rows)


def test_a_line_before_its_order_moves_to_the_orders_day_when_the_order_arrives(warehouse_conn):
    conn = warehouse_conn
    add_report_line(conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")
    add_report_line(conn, C, 2, LINE_DAY, 0, paid_storage="5.00")  # no srid: always its own day
    assert placed(conn) == {1: LINE_DAY, 2: LINE_DAY}
    before = finance_changes(conn)

    add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")

    assert placed(conn) == {1: ORDER_DAY, 2: LINE_DAY}
    after = finance_changes(conn)
    # The line left one day and reached the other: both recompute.
    assert after[LINE_DAY] > before[LINE_DAY]
    assert after.get(ORDER_DAY, 0) > before.get(ORDER_DAY, 0)


def test_a_line_after_its_order_is_placed_on_the_orders_day_at_once(warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")
    add_order(conn, "other", "s1", days_ago(20), 101, "1.00")  # the same srid in another cabinet
    add_report_line(conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")
    add_report_line(conn, C, 2, LINE_DAY, 101, srid="unknown", for_pay="1.00")
    assert placed(conn) == {1: ORDER_DAY, 2: LINE_DAY}
    assert set(finance_changes(conn)) == {ORDER_DAY, LINE_DAY}


def test_a_redated_deleted_or_truncated_order_moves_its_lines(warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")
    add_order(conn, C, "s2", ORDER_DAY, 102, "50.00")
    add_report_line(conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")
    add_report_line(conn, C, 2, LINE_DAY, 102, srid="s2", for_pay="40.00")
    redated = days_ago(12)
    before = finance_changes(conn)

    conn.execute("UPDATE wb_orders SET day = %s WHERE cabinet_id = %s AND srid = 's1'", (redated, C))
    assert placed(conn) == {1: redated, 2: ORDER_DAY}
    after = finance_changes(conn)
    assert after[ORDER_DAY] > before[ORDER_DAY] and redated in after

    # An update that keeps the order's day (a cancellation) leaves its lines and their days alone.
    conn.execute("UPDATE wb_orders SET is_cancel = true WHERE cabinet_id = %s", (C,))
    assert placed(conn) == {1: redated, 2: ORDER_DAY}
    assert finance_changes(conn) == after

    conn.execute("DELETE FROM wb_orders WHERE cabinet_id = %s AND srid = 's1'", (C,))
    assert placed(conn) == {1: LINE_DAY, 2: ORDER_DAY}

    conn.execute("TRUNCATE wb_orders")
    assert placed(conn) == {1: LINE_DAY, 2: LINE_DAY}


def test_a_line_rewritten_with_another_srid_or_day_is_placed_again(warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")
    add_order(conn, C, "s2", days_ago(15), 101, "120.00")
    add_report_line(conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")
    add_report_line(conn, C, 2, LINE_DAY, 101, for_pay="1.00")

    conn.execute("UPDATE wb_report_lines SET srid = 's2' WHERE rrd_id = 1")
    conn.execute("UPDATE wb_report_lines SET day = %s WHERE rrd_id = 2", (days_ago(3),))
    assert placed(conn) == {1: days_ago(15), 2: days_ago(3)}
    # Nobody can put a line elsewhere by hand, or leave it unplaced: the trigger places it again.
    conn.execute("UPDATE wb_report_lines SET attributed_day = %s", (days_ago(40),))
    assert placed(conn) == {1: days_ago(15), 2: days_ago(3)}
    conn.execute("UPDATE wb_report_lines SET attributed_day = NULL")
    assert placed(conn) == {1: days_ago(15), 2: days_ago(3)}
    # A deleted line counts on the day it was placed on.
    before = finance_changes(conn)
    conn.execute("DELETE FROM wb_report_lines WHERE rrd_id = 1")
    assert finance_changes(conn)[days_ago(15)] > before[days_ago(15)]


def test_a_line_and_its_order_written_at_once_in_two_transactions_meet(optima_env, database_url):
    """The line's writer has not committed when the order's writer looks for its lines: without the
    per-cabinet placement lock the order would find no line, the line no order, and the line would
    stay on its own day for good."""
    schema = f"optima_{optima_env}"
    with connect(database_url, schema) as lines_conn, connect(database_url, schema) as orders_conn:
        add_report_line(lines_conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")  # open transaction
        done = threading.Event()

        def write_order() -> None:
            add_order(orders_conn, C, "s1", ORDER_DAY, 101, "120.00")
            orders_conn.commit()
            done.set()

        writer = threading.Thread(target=write_order)
        writer.start()
        time.sleep(0.5)
        waited = not done.is_set()  # the order's placement waits for the line's transaction
        lines_conn.commit()
        writer.join(10)
        assert done.is_set() and waited
        with connect(database_url, schema) as conn:
            assert placed(conn) == {1: ORDER_DAY}


def test_another_cabinets_writers_are_not_held(optima_env, database_url):
    schema = f"optima_{optima_env}"
    with connect(database_url, schema) as first, connect(database_url, schema) as second:
        add_report_line(first, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")  # open transaction
        second.execute("SET lock_timeout = '2s'")
        add_order(second, "c2", "s1", ORDER_DAY, 101, "120.00")
        add_report_line(second, "c2", 2, LINE_DAY, 101, srid="s1", for_pay="1.00")
        second.commit()
        first.commit()
        with connect(database_url, schema) as conn:
            assert placed(conn) == {1: LINE_DAY, 2: ORDER_DAY}


def counts(conn) -> list[tuple]:
    """Every watermark's count and recomputed count."""
    return conn.execute(
        "SELECT cabinet_id, table_name, day, changes, recomputed FROM rnp_watermarks ORDER BY 1, 2, 3"
    ).fetchall()


def test_the_migration_places_existing_lines_without_touching_the_watermarks(database_url, scratch_schema):
    upgrade(database_url, scratch_schema, "0014_rnp_kopecks")
    with connect(database_url, scratch_schema, autocommit=True) as conn:
        add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")
        add_report_line(conn, C, 1, LINE_DAY, 101, srid="s1", for_pay="100.00")
        add_report_line(conn, C, 2, LINE_DAY, 101, srid="nobody", for_pay="1.00")
        add_report_line(conn, C, 3, LINE_DAY, 0, paid_storage="1.00")
        conn.execute("UPDATE rnp_watermarks SET recomputed = changes")
        watermarks = counts(conn)

    upgrade(database_url, scratch_schema)

    with connect(database_url, scratch_schema, autocommit=True) as conn:
        assert placed(conn) == {1: ORDER_DAY, 2: LINE_DAY, 3: LINE_DAY}
        assert counts(conn) == watermarks


def test_the_finance_load_places_its_lines_itself(warehouse_conn):
    """The API load computes each line's day in its INSERT (the trigger only mends what a writer left
    wrong): with the trigger off, its lines are still placed."""
    from optima_pipelines.load import merge_rows
    from optima_pipelines.sync.finance import PLACED

    conn = warehouse_conn
    add_order(conn, C, "s1", ORDER_DAY, 101, "120.00")
    conn.execute("ALTER TABLE wb_report_lines DISABLE TRIGGER wb_report_lines_place_insert")
    conn.execute("ALTER TABLE wb_report_lines DISABLE TRIGGER wb_report_lines_place_update")
    columns = ("cabinet_id", "rrd_id", "day", "srid", "for_pay")
    with conn.transaction():
        merge_rows(conn, "wb_report_lines", columns, ("cabinet_id", "rrd_id"),
                   [(C, 1, LINE_DAY, "s1", 10), (C, 2, LINE_DAY, "none", 1)], derived=PLACED)  # fmt: skip
    assert placed(conn) == {1: ORDER_DAY, 2: LINE_DAY}
    with conn.transaction():  # a changed line is written again, and placed again
        add_order(conn, C, "s2", days_ago(30), 101, "1.00")
        merge_rows(conn, "wb_report_lines", columns, ("cabinet_id", "rrd_id"), [(C, 2, LINE_DAY, "s2", 1)],
                   derived=PLACED)  # fmt: skip
    assert placed(conn) == {1: ORDER_DAY, 2: days_ago(30)}
