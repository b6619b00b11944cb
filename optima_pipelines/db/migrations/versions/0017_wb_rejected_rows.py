"""Rows WB sent that were refused or flagged (docs/data.md, "Bad values from WB").

Revision ID: 0017_wb_rejected_rows
Revises: 0016_rnp_numeric_sums

``wb_rejected_rows`` is where an operator sees them: per cabinet and feed (the warehouse table the
row was for), the outcome (``refused``: not stored; ``flagged``: stored, but a time of it is in the
future and never a cursor), WB's name of the value at fault, the reason, the row's key when it could
be read and the row as WB sent it (JSON, at most 8,000 characters). WB sends the same bad row again
on every sync until it corrects it: one row per (cabinet, feed, outcome, raw row), with when it was
first and last seen, by which runs, and how often.
"""

from __future__ import annotations

from alembic import op

revision = "0017_wb_rejected_rows"
down_revision = "0016_rnp_numeric_sums"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE wb_rejected_rows (
            id             bigserial PRIMARY KEY,
            cabinet_id     text NOT NULL REFERENCES cabinets (id) ON DELETE CASCADE,
            feed           text NOT NULL,
            endpoint       text NOT NULL,
            outcome        text NOT NULL CHECK (outcome IN ('refused', 'flagged')),
            row_key        text,
            field          text,
            reason         text NOT NULL,
            raw            text NOT NULL,
            raw_md5        text NOT NULL,
            first_run_id   text,
            last_run_id    text,
            first_seen_at  timestamptz NOT NULL DEFAULT now(),
            last_seen_at   timestamptz NOT NULL DEFAULT now(),
            times_seen     integer NOT NULL DEFAULT 1,
            UNIQUE (cabinet_id, feed, outcome, raw_md5)
        );
        CREATE INDEX wb_rejected_rows_seen_idx ON wb_rejected_rows (last_seen_at);
        COMMENT ON TABLE wb_rejected_rows IS
            'Rows WB sent that a sync refused (not stored) or flagged (stored, a time in the future): docs/data.md';
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE wb_rejected_rows")
