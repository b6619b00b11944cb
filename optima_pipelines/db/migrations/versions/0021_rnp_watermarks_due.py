"""A watermark says since when its pair is due: ``rnp_watermarks.due_since``.

Revision ID: 0021_rnp_watermarks_due
Revises: 0020_ad_stats_answers

The watermarks are the one record of what changed that the РНП's planner reads (mart/plan.py): a
(cabinet, РНП table, day) is **due** when its feeds changed after its last recompute, or it was never
recomputed (``recomputed IS DISTINCT FROM changes``). The re-aggregation sensor and a user's import
recompute the due pairs, whoever wrote the feeds (a load, a report file, a replay, a person in psql),
and whatever the feeds' materializations said.

``due_since`` is when the pair became due (NULL: it is not). It is kept by a row trigger on the
watermarks themselves, whoever writes them (the feeds' triggers, a recompute, a write to the mart by
anyone else, a TRUNCATE): set when a pair becomes due, kept while it stays due, cleared when a
recompute catches up. The re-aggregation lag (/metrics) is measured from it, and a partial index on
it lets the sensor find the due pairs among all the cabinets' days at every tick with an index scan.

Existing pairs that are due get the migration's time.
"""

from __future__ import annotations

from alembic import op

revision = "0021_rnp_watermarks_due"
down_revision = "0020_ad_stats_answers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE rnp_watermarks ADD COLUMN due_since timestamptz")
    op.execute("UPDATE rnp_watermarks SET due_since = now() WHERE recomputed IS DISTINCT FROM changes")
    op.execute(
        """
        CREATE FUNCTION rnp_watermark_due() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.recomputed IS NOT DISTINCT FROM NEW.changes THEN
                NEW.due_since := NULL;
            ELSIF NEW.due_since IS NULL THEN
                NEW.due_since := now();
            END IF;
            RETURN NEW;
        END $$;
        """
    )
    op.execute(
        "CREATE TRIGGER rnp_watermarks_due BEFORE INSERT OR UPDATE ON rnp_watermarks "
        "FOR EACH ROW EXECUTE FUNCTION rnp_watermark_due()"
    )
    op.execute("CREATE INDEX rnp_watermarks_due_idx ON rnp_watermarks (day, cabinet_id) WHERE due_since IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS rnp_watermarks_due_idx")
    op.execute("DROP TRIGGER IF EXISTS rnp_watermarks_due ON rnp_watermarks")
    op.execute("DROP FUNCTION IF EXISTS rnp_watermark_due()")
    op.execute("ALTER TABLE rnp_watermarks DROP COLUMN IF EXISTS due_since")
