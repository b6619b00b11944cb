"""The engines' tables: autobidder rules, repricer rules, booking tasks, bulk pricing, autoreply, A/B tests, audit.

Revision ID: 0005_engines
Revises: 0004_rnp

A placeholder in the chain, reserved so that work on separate branches can land in any order.
"""

revision = "0005_engines"
down_revision = "0004_rnp"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
