"""Operations: whatever metrics, health and maintenance need.

Revision ID: 0006_ops
Revises: 0005_engines

A placeholder in the chain, reserved so that work on separate branches can land in any order.
"""

revision = "0006_ops"
down_revision = "0005_engines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
