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
        -- "Next allowed at" per cabinet and WB limit group, so that consecutive runs of one cabinet
        -- honour a pause (429 X-Ratelimit-Retry, a penalty) that an earlier run learned.
        CREATE TABLE wb_rate_limits (
            cabinet_id      text NOT NULL,
            limit_group     text NOT NULL,
            next_allowed_at timestamptz NOT NULL,
            reason          text,
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, limit_group)
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE wb_rate_limits")
