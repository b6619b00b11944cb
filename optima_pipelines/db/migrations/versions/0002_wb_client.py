"""WB client state: the per-(cabinet, WB limit group) rate limiter, persisted across runs.

Revision ID: 0002_wb_client
Revises: 0001_core
"""

from alembic import op

revision = "0002_wb_client"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- One token bucket per cabinet and WB limit group (optima_pipelines/wb/limiter.py), so that
        -- every process, and the next run of a cabinet, honours what an earlier run spent or learned.
        -- next_allowed_at: when the next request may be sent (pacing and any pause); bucket_full_at:
        -- when the bucket is full again; paused_until/reason: the last pause WB imposed (a 429's
        -- X-Ratelimit-Retry) and why. Never a token here.
        CREATE TABLE wb_rate_limits (
            cabinet_id      text NOT NULL,
            limit_group     text NOT NULL,
            next_allowed_at timestamptz NOT NULL DEFAULT 'epoch',
            bucket_full_at  timestamptz NOT NULL DEFAULT 'epoch',
            paused_until    timestamptz NOT NULL DEFAULT 'epoch',
            reason          text,
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, limit_group)
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE wb_rate_limits")
