"""Why and when WB rejected a cabinet's token.

Revision ID: 0011_token_rejected
Revises: 0010_wb_optional_fields

A cabinet whose token WB refuses (401 for the token itself) is set to ``token_invalid`` by the run
that learned it: scheduled work stops until `cabinets set-token` gives it a new token, which clears
these columns and makes it active again.
"""

from alembic import op

revision = "0011_token_rejected"
down_revision = "0010_wb_optional_fields"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE cabinets
            ADD COLUMN token_rejected_at     timestamptz,
            ADD COLUMN token_rejected_reason text;
        """
    )


def downgrade() -> None:
    op.execute("ALTER TABLE cabinets DROP COLUMN token_rejected_at, DROP COLUMN token_rejected_reason")
