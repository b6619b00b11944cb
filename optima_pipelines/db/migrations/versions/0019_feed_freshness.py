"""Freshness per cabinet and feed: when each cabinet's feed last confirmed WB's data.

Revision ID: 0019_feed_freshness
Revises: 0018_run_workers

``ops_feed_sync_totals`` already holds one row per (feed, cabinet), written by every sync in its own
transaction (``operations.records.record_feed_sync``). Its ``last_success_at`` also moves when a sync ends
deferred by WB (a pause that stored nothing new), so it cannot tell "WB's data confirmed" from "WB
said come back later". Two columns say it:

- ``confirmed_at``: the end of the last sync that went to the end of WB's data, changed or not;
- ``last_error``: the (redacted) error of the last sync, when it failed.

Existing rows start confirmed at their last success, so a deployment does not see every cabinet
stale on upgrade. The index on ``sweep_outcomes`` finds a stale cabinet's last sweep outcome
(account-busy) without reading a whole window's outcomes.
"""

from __future__ import annotations

from alembic import op

revision = "0019_feed_freshness"
down_revision = "0018_run_workers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE ops_feed_sync_totals ADD COLUMN confirmed_at timestamptz, ADD COLUMN last_error text;
        UPDATE ops_feed_sync_totals SET confirmed_at = last_success_at;
        CREATE INDEX sweep_outcomes_cabinet_idx ON sweep_outcomes (cabinet_id, finished_at);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX sweep_outcomes_cabinet_idx;
        ALTER TABLE ops_feed_sync_totals DROP COLUMN confirmed_at, DROP COLUMN last_error;
        """
    )
