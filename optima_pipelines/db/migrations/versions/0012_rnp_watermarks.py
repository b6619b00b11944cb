"""A watermark per (cabinet, day) and РНП table: the feeds' changes against the last recompute.

Revision ID: 0012_rnp_watermarks
Revises: 0011_token_rejected

``rnp_watermarks.changes`` counts the writes to the feeds that can change the table's rows of that
(cabinet, day); ``recomputed`` is the value of ``changes`` the last recompute of the pair saw
(NULL: never, or the table was written by someone else since). A recompute skips the pairs where
they are equal (mart/recompute.py), so re-running a range whose feeds did not change writes nothing and
computes nothing.

The counters are kept by statement-level triggers on the six feeds, whoever writes them (the loads,
the CLI, a person in psql): each statement bumps the pairs its rows touch, as the re-aggregation
sensor's event contract names them (docs/ARCHITECTURE.md):

- ``wb_orders``: its days, for rnp_sales and rnp_daily, and for rnp_finance when the order is new,
  deleted or re-dated (the finance rollup reads orders only for their srid and day); and, for
  those, the own days of the report lines with its srid (they move to or from the order's day),
  for rnp_finance and rnp_daily;
- ``wb_sales``: rnp_sales, rnp_daily; ``ad_campaign_stats``: rnp_ads, rnp_daily;
- ``wb_report_lines``: the lines' own days and the days of their source orders, for rnp_finance
  and rnp_daily;
- ``rnp_funnel_stats``, ``stocks``: rnp_daily.

Rows are locked in key order by each statement; a feed transaction of several statements and a
recompute of the same cabinet can still deadlock (PostgreSQL aborts one of them with SQLSTATE
40P01, which retries.is_transient retries). The cost on a load: one GROUP BY of the statement's
rows, and for new orders an index probe of report lines by srid (not measured by bench/ingest.py).

A write to one of the four РНП tables by anything but the recompute (which sets
``optima.rnp_recompute`` for its transaction), and any TRUNCATE, forgets what that table's
watermarks say was computed: the next recompute of every pair computes again.
"""

from alembic import op

revision = "0012_rnp_watermarks"
down_revision = "0011_token_rejected"
branch_labels = None
depends_on = None

FEEDS = ("wb_orders", "wb_sales", "ad_campaign_stats", "wb_report_lines", "rnp_funnel_stats", "stocks")
MART = ("rnp_sales", "rnp_ads", "rnp_finance", "rnp_daily")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE rnp_watermarks (
            cabinet_id  text NOT NULL,
            table_name  text NOT NULL,
            day         date NOT NULL,
            changes     bigint NOT NULL DEFAULT 0,
            recomputed  bigint,
            PRIMARY KEY (cabinet_id, table_name, day)
        )
        """
    )
    op.execute(_FEED_CHANGED)
    for table in FEEDS:
        for event, refs in (
            ("INSERT", "NEW TABLE AS new_rows"),
            ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
            ("DELETE", "OLD TABLE AS old_rows"),
        ):
            op.execute(
                f"CREATE TRIGGER {table}_rnp_{event.lower()} AFTER {event} ON {table} "
                f"REFERENCING {refs} FOR EACH STATEMENT EXECUTE FUNCTION rnp_feed_changed()"
            )
        op.execute(
            f"CREATE TRIGGER {table}_rnp_truncate AFTER TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION rnp_feed_changed()"
        )
    op.execute(
        """
        CREATE FUNCTION rnp_mart_written() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'TRUNCATE' AND coalesce(current_setting('optima.rnp_recompute', true), '') = 'on' THEN
                RETURN NULL;
            END IF;
            UPDATE rnp_watermarks SET recomputed = NULL WHERE table_name = TG_TABLE_NAME AND recomputed IS NOT NULL;
            RETURN NULL;
        END $$;
        """
    )
    for table in MART:
        op.execute(
            f"CREATE TRIGGER {table}_rnp_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION rnp_mart_written()"
        )


_FEED_CHANGED = """
CREATE FUNCTION rnp_feed_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    targets text[];
    own text[];
BEGIN
    targets := CASE TG_TABLE_NAME
        WHEN 'wb_orders' THEN ARRAY['rnp_sales', 'rnp_finance', 'rnp_daily']
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
    -- rnp_finance reads orders only for their srid and day: an update that keeps both (a
    -- cancellation, a price) leaves it as it is.
    own := CASE WHEN TG_TABLE_NAME = 'wb_orders' AND TG_OP = 'UPDATE' THEN ARRAY['rnp_sales', 'rnp_daily']
                ELSE targets END;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO rnp_touched SELECT DISTINCT n.cabinet_id, t, n.day FROM new_rows n, unnest(own) t;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO rnp_touched SELECT DISTINCT o.cabinet_id, t, o.day FROM old_rows o, unnest(own) t;
    END IF;
    IF TG_TABLE_NAME = 'wb_report_lines' THEN
        -- Where the lines are placed: their source orders' days.
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO rnp_touched
            SELECT DISTINCT o.cabinet_id, t, o.day
            FROM (SELECT DISTINCT cabinet_id, srid FROM new_rows WHERE srid IS NOT NULL) l
            JOIN wb_orders o ON o.cabinet_id = l.cabinet_id AND o.srid = l.srid, unnest(targets) t;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO rnp_touched
            SELECT DISTINCT o.cabinet_id, t, o.day
            FROM (SELECT DISTINCT cabinet_id, srid FROM old_rows WHERE srid IS NOT NULL) l
            JOIN wb_orders o ON o.cabinet_id = l.cabinet_id AND o.srid = l.srid, unnest(targets) t;
        END IF;
    ELSIF TG_TABLE_NAME = 'wb_orders' THEN
        -- Report lines of a new, deleted or re-dated order move between their own day and the order's.
        IF TG_OP = 'INSERT' THEN
            INSERT INTO rnp_touched
            SELECT DISTINCT l.cabinet_id, t, l.day
            FROM new_rows m JOIN wb_report_lines l ON l.cabinet_id = m.cabinet_id AND l.srid = m.srid,
                 unnest(ARRAY['rnp_finance', 'rnp_daily']) t;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO rnp_touched
            SELECT DISTINCT l.cabinet_id, t, l.day
            FROM old_rows m JOIN wb_report_lines l ON l.cabinet_id = m.cabinet_id AND l.srid = m.srid,
                 unnest(ARRAY['rnp_finance', 'rnp_daily']) t;
        ELSE
            -- A re-dated order: its old and new day, and its lines' own days.
            INSERT INTO rnp_touched
            SELECT DISTINCT n.cabinet_id, 'rnp_finance', d
            FROM old_rows o JOIN new_rows n ON n.cabinet_id = o.cabinet_id AND n.srid = o.srid,
                 unnest(ARRAY[o.day, n.day]) d
            WHERE o.day IS DISTINCT FROM n.day;
            INSERT INTO rnp_touched
            SELECT DISTINCT l.cabinet_id, t, l.day
            FROM old_rows o JOIN new_rows n ON n.cabinet_id = o.cabinet_id AND n.srid = o.srid
            JOIN wb_report_lines l ON l.cabinet_id = n.cabinet_id AND l.srid = n.srid,
                 unnest(ARRAY['rnp_finance', 'rnp_daily']) t
            WHERE o.day IS DISTINCT FROM n.day;
        END IF;
    END IF;
    -- Sorted, so that two writers of the same pairs lock them in the same order.
    INSERT INTO rnp_watermarks AS w (cabinet_id, table_name, day, changes)
    SELECT DISTINCT cabinet_id, table_name, day, 1 FROM rnp_touched WHERE day IS NOT NULL ORDER BY 1, 2, 3
    ON CONFLICT (cabinet_id, table_name, day) DO UPDATE SET changes = w.changes + 1;
    RETURN NULL;
END $$;
"""


def downgrade() -> None:
    for table in MART:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_rnp_written ON {table}")
    for table in FEEDS:
        for event in ("insert", "update", "delete", "truncate"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_rnp_{event} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS rnp_mart_written(), rnp_feed_changed()")
    op.execute("DROP TABLE IF EXISTS rnp_watermarks")
