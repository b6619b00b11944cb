"""The РНП mart (rnp_daily, range-partitioned) and its rollups.

Revision ID: 0004_rnp
Revises: 0003_feeds

A placeholder in the chain, reserved so that work on separate branches can land in any order.
"""

revision = "0004_rnp"
down_revision = "0003_feeds"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
