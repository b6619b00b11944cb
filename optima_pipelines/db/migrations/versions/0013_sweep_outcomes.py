"""What each cabinet of a sweep came to: the record behind a sweep's figures in /metrics.

Revision ID: 0013_sweep_outcomes
Revises: 0012_rnp_watermarks

A sweep (jobs/wb_sync.py) is one run over many cabinets. Each cabinet's outcome gets a row:
``succeeded``, ``skipped`` (account-busy: another run held the cabinet's lock all the while),
``deferred`` (WB paused the cabinet; the resume sensor runs it again), ``retrying`` (a transient
failure; a single-cabinet run retries it) or ``failed`` (a permanent failure, the reason kept).
The nightly prune_runs job deletes rows older than the run retention, as it does ops_feed_syncs.
"""

from __future__ import annotations

from alembic import op

revision = "0013_sweep_outcomes"
down_revision = "0012_rnp_watermarks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE sweep_outcomes (
            id bigserial PRIMARY KEY,
            run_id text NOT NULL,
            job text NOT NULL,
            queue text NOT NULL,
            cabinet_id text NOT NULL,
            outcome text NOT NULL CHECK (outcome IN ('succeeded', 'skipped', 'deferred', 'retrying', 'failed')),
            reason text,
            finished_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX sweep_outcomes_finished_idx ON sweep_outcomes (finished_at);
        CREATE INDEX sweep_outcomes_run_idx ON sweep_outcomes (run_id);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE sweep_outcomes")
