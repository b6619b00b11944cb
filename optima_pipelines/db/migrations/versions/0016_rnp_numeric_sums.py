"""The РНП rollups sum money as numeric again: migration 0014's kopeck helpers are dropped.

Revision ID: 0016_rnp_numeric_sums
Revises: 0015_report_lines_attributed_day

Migration 0014 summed the rollups' money as bigint kopecks (``rnp_kopecks``, ``rnp_money``, with
``rnp_numsum`` for amounts of more than two decimals) because ``sum(numeric)`` in a HashAggregate
kept a large state per group. The rollups now aggregate their feed rows in key order, in a
streaming GroupAggregate that keeps one state at a time, and there ``sum(numeric)`` is the cheaper
of the two: it is one aggregate per column instead of two, with no multiplication and cast per
amount (bench/rnp_recompute.py: 0.1-0.15 s less per rollup of a 45-day half), and exact whatever
the decimals. ``rnp_sum`` (the bigint sum of counters) stays.
"""

from __future__ import annotations

from alembic import op

revision = "0016_rnp_numeric_sums"
down_revision = "0015_report_lines_attributed_day"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS rnp_money(bigint, numeric), rnp_kopecks(numeric)")
    op.execute("DROP AGGREGATE IF EXISTS rnp_numsum(numeric)")


def downgrade() -> None:
    op.execute(
        """
        CREATE AGGREGATE rnp_numsum(numeric) (
            SFUNC = numeric_add, STYPE = numeric, COMBINEFUNC = numeric_add, PARALLEL = SAFE
        );
        CREATE FUNCTION rnp_kopecks(numeric) RETURNS bigint
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT CASE WHEN scale($1) <= 2 THEN ($1 * 100)::bigint END $$;
        CREATE FUNCTION rnp_money(bigint, numeric) RETURNS numeric
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT CASE WHEN $2 IS NULL THEN coalesce($1, 0) * 0.01 ELSE coalesce($1, 0) * 0.01 + $2 END $$;
        """
    )
