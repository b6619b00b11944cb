"""The run workers' heartbeat and their runs' execution claims (issue 37): at most one execution per run.

Revision ID: 0018_run_workers
Revises: 0017_wb_rejected_rows

``run_workers``: one row per run worker process (a Celery prefork child of ``serve run-worker``),
beaten every few seconds with the runs it holds (operations/workers.py). A worker is alive while its beat is
fresh; no pid or host name is looked at, so a worker on another host is judged like a local one.

``run_claims``: one row per run a worker began to execute, claimed in the same transaction that
checked no other execution of the run, or of its lineage (the run it retries, ``root_run_id``), is
alive. Run monitoring reads a run's health from its claim, not from the broker's task state, which
a broker restart loses.
"""

from __future__ import annotations

from alembic import op

revision = "0018_run_workers"
down_revision = "0017_wb_rejected_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE run_workers (
            id text PRIMARY KEY,               -- <name>@<host>/<pid>
            name text NOT NULL,                -- the Celery node name (run-worker-1@host)
            host text NOT NULL,
            pid integer NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            beat_at timestamptz NOT NULL DEFAULT now(),
            runs text[] NOT NULL DEFAULT '{}'  -- the runs it executes now
        );
        CREATE INDEX run_workers_beat_idx ON run_workers (beat_at);
        CREATE TABLE run_claims (
            run_id text PRIMARY KEY,
            root_run_id text NOT NULL,         -- the first run of its retries (dagster/root_run_id)
            worker_id text NOT NULL,           -- run_workers.id of the executing process
            claimed_at timestamptz NOT NULL DEFAULT now(),
            released_at timestamptz,
            outcome text CHECK (outcome IN ('success', 'failure', 'canceled'))
        );
        CREATE INDEX run_claims_root_idx ON run_claims (root_run_id);
        CREATE INDEX run_claims_claimed_idx ON run_claims (claimed_at);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE run_claims; DROP TABLE run_workers")
