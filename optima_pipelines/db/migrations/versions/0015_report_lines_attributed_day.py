"""Each report line keeps the day the РНП places it on: ``wb_report_lines.attributed_day``.

Revision ID: 0015_report_lines_attributed_day
Revises: 0014_rnp_kopecks

A finance-report line belongs to the Moscow day of its source order (the ``wb_orders`` row with its
srid), else to its own day (docs/ARCHITECTURE.md). rnp_finance used to find that day by joining every
report line of the range to the cabinet's orders: for a 45-day half of a 90-day, 5,000-product
cabinet, 815k lines probed against 675k orders to keep half of them (0.9 s of the rollup's 2.0 s of
CPU, bench/rnp_recompute.py). The day is now kept on the line, indexed by (cabinet, day), and the
rollup reads a range's lines by index with no join.

The column is kept right by triggers, whoever writes (the loads, a user's report file, the CLI, a
person in psql), and in whatever order WB delivers:

- the loads compute it in their INSERT (``load/merge.py``'s derived columns, the report upload's
  SQL), set-based; a statement trigger on ``wb_report_lines`` (after INSERT, UPDATE) gives every line
  the statement wrote with no day or a wrong one its day (a writer that does not compute it, such as
  psql): the line's order's day, or the line's own day, so a line that arrives before its order is
  placed on its own day. The column is NULL only inside the statement that writes the line. A row
  trigger doing the same look-up per line doubled the CPU of writing report lines (100,000 lines:
  2.1 s of the backend without it, 4.1 s with it; the statement trigger costs the loads one join);
- a statement trigger on ``wb_orders`` (after INSERT, UPDATE, DELETE) re-places the lines of the
  orders the statement created, deleted or re-dated, by one UPDATE of those lines; TRUNCATE of the
  orders puts every line back on its own day.

Both triggers take a transaction-level advisory lock per cabinet (keys (0x524E4C,
hashtext(cabinet_id))) before they look (each statement of a READ COMMITTED
transaction, the loads' level, sees what was committed before it started): without it, a line
written in one transaction and its order in another, at once, would each miss the other's
uncommitted row and the line would stay on its own day. Writers of one cabinet's lines and orders
take turns until commit; other cabinets are not held.

The watermark trigger (migration 0012's ``rnp_feed_changed``) now counts a line's change on its
``attributed_day``, before and after, and an order's change only for rnp_sales and rnp_daily: the
lines an order re-places are updated, and that update counts their old and new day itself.

The existing lines are placed by one UPDATE, with the watermark triggers off (the placement is the
one rnp_finance computed until now, so nothing the mart holds changes).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0015_report_lines_attributed_day"
down_revision = "0014_rnp_kopecks"
branch_labels = None
depends_on = None

_PLACE_LINES = """
CREATE FUNCTION rnp_place_lines() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Lines written by a trigger (this one's UPDATE below, the orders' placement) are placed already;
    -- a statement trigger fires even for no rows, so without this the UPDATE would fire it for ever.
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;
    END IF;
    -- In cabinet order, so that two statements over several cabinets take the locks in one order;
    -- the look-up below runs after the lock, on a snapshot that sees what its holder committed.
    PERFORM pg_advisory_xact_lock(x'524E4C'::int, hashtext(c.cabinet_id))
    FROM (SELECT DISTINCT cabinet_id FROM new_rows ORDER BY 1) c;
    -- The lines written with no day or a wrong one (a writer that does not compute it, such as psql,
    -- or an order that another transaction committed meanwhile) get theirs. The loads compute the day
    -- in their INSERT (load/merge.py's derived columns), so for them this finds nothing to update.
    UPDATE wb_report_lines l SET attributed_day = x.day
    FROM (SELECT n.cabinet_id, n.rrd_id, coalesce(o.day, n.day) AS day
          FROM new_rows n LEFT JOIN wb_orders o ON o.cabinet_id = n.cabinet_id AND o.srid = n.srid
          WHERE n.attributed_day IS DISTINCT FROM coalesce(o.day, n.day)) x
    WHERE l.cabinet_id = x.cabinet_id AND l.rrd_id = x.rrd_id;
    RETURN NULL;
END $$;
"""

_PLACE_ORDERS_LINES = """
CREATE FUNCTION rnp_place_orders_lines() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE wb_report_lines SET attributed_day = day WHERE attributed_day <> day;
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp.rnp_placed') IS NULL THEN
        CREATE TEMP TABLE rnp_placed (cabinet_id text, srid text) ON COMMIT DELETE ROWS;
    ELSE
        TRUNCATE rnp_placed;
    END IF;
    -- The orders whose (srid, day) the statement created, deleted or changed.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO rnp_placed SELECT DISTINCT cabinet_id, srid FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO rnp_placed SELECT DISTINCT cabinet_id, srid FROM old_rows;
    ELSE
        INSERT INTO rnp_placed
        SELECT n.cabinet_id, n.srid FROM new_rows n
        WHERE NOT EXISTS (SELECT 1 FROM old_rows o
                          WHERE o.cabinet_id = n.cabinet_id AND o.srid = n.srid AND o.day = n.day)
        UNION
        SELECT o.cabinet_id, o.srid FROM old_rows o
        WHERE NOT EXISTS (SELECT 1 FROM new_rows n
                          WHERE n.cabinet_id = o.cabinet_id AND n.srid = o.srid AND n.day = o.day);
    END IF;
    -- In cabinet order, so that two statements over several cabinets take the locks in one order.
    PERFORM pg_advisory_xact_lock(x'524E4C'::int, hashtext(c.cabinet_id))
    FROM (SELECT DISTINCT cabinet_id FROM rnp_placed ORDER BY 1) c;
    -- The filter leaves lines already in place untouched.
    UPDATE wb_report_lines l SET attributed_day = coalesce(o.day, l.day)
    FROM rnp_placed p LEFT JOIN wb_orders o ON o.cabinet_id = p.cabinet_id AND o.srid = p.srid
    WHERE l.cabinet_id = p.cabinet_id AND l.srid = p.srid AND l.attributed_day <> coalesce(o.day, l.day);
    RETURN NULL;
END $$;
"""

#: Migration 0012's function, with a line counted on its attributed day and an order only for the
#: tables that read it.
_FEED_CHANGED = """
CREATE OR REPLACE FUNCTION rnp_feed_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    targets text[];
BEGIN
    targets := CASE TG_TABLE_NAME
        WHEN 'wb_orders' THEN ARRAY['rnp_sales', 'rnp_daily']
        WHEN 'wb_sales' THEN ARRAY['rnp_sales', 'rnp_daily']
        WHEN 'ad_campaign_stats' THEN ARRAY['rnp_ads', 'rnp_daily']
        WHEN 'wb_report_lines' THEN ARRAY['rnp_finance', 'rnp_daily']
        ELSE ARRAY['rnp_daily'] END;
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE rnp_watermarks SET recomputed = NULL WHERE table_name = ANY(targets);
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp.rnp_touched') IS NULL THEN
        CREATE TEMP TABLE rnp_touched (cabinet_id text, table_name text, day date) ON COMMIT DELETE ROWS;
    ELSE
        TRUNCATE rnp_touched;
    END IF;
    IF TG_TABLE_NAME = 'wb_report_lines' THEN
        -- A line counts where the РНП places it (migration 0015), before and after.
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO rnp_touched SELECT DISTINCT n.cabinet_id, t, n.attributed_day FROM new_rows n, unnest(targets) t;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO rnp_touched SELECT DISTINCT o.cabinet_id, t, o.attributed_day FROM old_rows o, unnest(targets) t;
        END IF;
    ELSE
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO rnp_touched SELECT DISTINCT n.cabinet_id, t, n.day FROM new_rows n, unnest(targets) t;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO rnp_touched SELECT DISTINCT o.cabinet_id, t, o.day FROM old_rows o, unnest(targets) t;
        END IF;
    END IF;
    -- Sorted, so that two writers of the same pairs lock them in the same order.
    INSERT INTO rnp_watermarks AS w (cabinet_id, table_name, day, changes)
    SELECT DISTINCT cabinet_id, table_name, day, 1 FROM rnp_touched WHERE day IS NOT NULL ORDER BY 1, 2, 3
    ON CONFLICT (cabinet_id, table_name, day) DO UPDATE SET changes = w.changes + 1;
    RETURN NULL;
END $$;
"""


#: The transition tables a statement trigger of each event sees.
_TRANSITION_TABLES = {
    "INSERT": "NEW TABLE AS new_rows",
    "UPDATE": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "OLD TABLE AS old_rows",
}


def _statement_triggers(table: str, name: str, function: str, events: tuple[str, ...]) -> None:
    """``<name>_<event>``: AFTER <event> ON <table>, once per statement, with its transition tables."""
    for event in events:
        op.execute(
            f"CREATE TRIGGER {name}_{event.lower()} AFTER {event} ON {table} "
            f"REFERENCING {_TRANSITION_TABLES[event]} FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )


def upgrade() -> None:
    op.execute("ALTER TABLE wb_report_lines ADD COLUMN attributed_day date")
    op.execute("ALTER TABLE wb_report_lines DISABLE TRIGGER USER")
    op.execute(
        """
        UPDATE wb_report_lines l
        SET attributed_day = coalesce((SELECT o.day FROM wb_orders o WHERE o.cabinet_id = l.cabinet_id
                                                                     AND o.srid = l.srid), l.day)
        """
    )
    op.execute("ALTER TABLE wb_report_lines ENABLE TRIGGER USER")
    op.execute("CREATE INDEX wb_report_lines_attributed_day_idx ON wb_report_lines (cabinet_id, attributed_day)")
    op.execute(_PLACE_LINES)
    _statement_triggers("wb_report_lines", "wb_report_lines_place", "rnp_place_lines", ("INSERT", "UPDATE"))
    op.execute(_PLACE_ORDERS_LINES)
    _statement_triggers("wb_orders", "wb_orders_place_lines", "rnp_place_orders_lines", ("INSERT", "UPDATE", "DELETE"))
    op.execute(
        "CREATE TRIGGER wb_orders_place_lines_truncate AFTER TRUNCATE ON wb_orders "
        "FOR EACH STATEMENT EXECUTE FUNCTION rnp_place_orders_lines()"
    )
    op.execute(_FEED_CHANGED)


def downgrade() -> None:
    # Migration 0012's function back as it was (the versions folder is not a package).
    spec = importlib.util.spec_from_file_location("rnp_watermarks", Path(__file__).with_name("0012_rnp_watermarks.py"))
    assert spec is not None and spec.loader is not None
    previous = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(previous)
    for event in ("insert", "update", "delete", "truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS wb_orders_place_lines_{event} ON wb_orders")
    for event in ("insert", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS wb_report_lines_place_{event} ON wb_report_lines")
    op.execute("DROP FUNCTION IF EXISTS rnp_place_orders_lines(), rnp_place_lines()")
    op.execute(previous._FEED_CHANGED.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute("ALTER TABLE wb_report_lines DROP COLUMN attributed_day")
