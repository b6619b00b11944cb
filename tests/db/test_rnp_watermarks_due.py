"""Which РНП pairs are due, and since when (``rnp_watermarks.due_since``, migration 0021).

A pair is due when its feeds changed after its last recompute, or it was never recomputed, whoever
wrote: the planner (mart/plan.py ``due_pairs``) reads nothing else to know what to recompute.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from optima_pipelines.mart.plan import due_pairs
from optima_pipelines.mart.recompute import statement
from tests.rnp_feeds import TODAY, add_order, add_stock, days_ago

C = "c1"


def since(conn: psycopg.Connection, table: str, day) -> datetime | None:
    row = conn.execute(
        "SELECT due_since FROM rnp_watermarks WHERE cabinet_id = %s AND table_name = %s AND day = %s", (C, table, day)
    ).fetchone()
    assert row is not None, (table, day)
    return row[0]


def recompute(conn: psycopg.Connection, table: str, day) -> None:
    """What a recompute records when it is done with a pair."""
    conn.execute(statement("mark_recomputed"), {"cabinets": [C], "days": [day], "table": table})


def test_a_pair_is_due_from_its_first_write_until_a_recompute_catches_up(warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "o1", TODAY, 7, "100.00")
    first = since(conn, "rnp_sales", TODAY)
    assert first is not None  # never recomputed: due
    assert set(due_pairs(conn, days_ago(5), TODAY).tables) == {(C, TODAY)}

    add_order(conn, C, "o2", TODAY, 7, "50.00")
    assert since(conn, "rnp_sales", TODAY) == first  # still due: since the first write

    recompute(conn, "rnp_sales", TODAY)
    recompute(conn, "rnp_daily", TODAY)
    assert since(conn, "rnp_sales", TODAY) is None
    assert due_pairs(conn, days_ago(5), TODAY).tables == {}

    # A later write makes it due again, from then on; a stock snapshot only the merge.
    add_order(conn, C, "o3", TODAY, 7, "10.00")
    add_stock(conn, C, days_ago(1), 7, 1, 1, 4)
    again = since(conn, "rnp_sales", TODAY)
    assert again is not None and again > first
    due = due_pairs(conn, days_ago(5), TODAY)
    assert due.tables == {(C, TODAY): {"rnp_sales", "rnp_daily"}, (C, days_ago(1)): {"rnp_daily"}}
    assert due.demands() == {(C, TODAY): {"rnp_sales"}, (C, days_ago(1)): set()}
    assert due.oldest == again


def test_the_state_a_plan_was_made_from_is_named_and_changes_with_any_write(warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "o1", TODAY, 7, "100.00")
    state = due_pairs(conn, days_ago(5), TODAY).state
    assert due_pairs(conn, days_ago(5), TODAY).state == state  # read again: the same runs
    add_order(conn, C, "o2", TODAY, 7, "100.00")
    assert due_pairs(conn, days_ago(5), TODAY).state != state
    # Recomputed, then due again with the same count (a write to the mart by someone else forgets
    # what was recomputed): a new state, so the sensor asks for new runs.
    before = due_pairs(conn, days_ago(5), TODAY).state
    for table in ("rnp_sales", "rnp_daily"):
        recompute(conn, table, TODAY)
    conn.execute("UPDATE rnp_watermarks SET recomputed = NULL")
    assert due_pairs(conn, days_ago(5), TODAY).state != before
    # Of other cabinets only: none of c1's.
    assert due_pairs(conn, days_ago(5), TODAY, ["c2"]).tables == {}


def test_the_migration_makes_the_pairs_that_were_due_due_and_no_other(database_url, scratch_schema):
    upgrade(database_url, scratch_schema, "0020_ad_stats_answers")
    with connect(database_url, scratch_schema, autocommit=True) as conn:
        add_order(conn, C, "o1", TODAY, 7, "100.00")
        add_order(conn, C, "o2", days_ago(1), 7, "100.00")
        recompute(conn, "rnp_sales", days_ago(1))
    upgrade(database_url, scratch_schema)
    with connect(database_url, scratch_schema, autocommit=True) as conn:
        assert since(conn, "rnp_sales", TODAY) is not None  # never recomputed
        assert since(conn, "rnp_daily", days_ago(1)) is not None
        assert since(conn, "rnp_sales", days_ago(1)) is None  # recomputed since its last write
