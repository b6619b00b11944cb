"""Feed columns WB's OpenAPI lets WB leave out become nullable.

Revision ID: 0010_wb_optional_fields
Revises: 0009_engines_prices_replies

WB's spec marks these fields optional and the client decodes them as optional (absent: NULL), so
their columns must take NULL: ``wb_orders.total_price`` (the РНП sums ``price_with_disc``, never
this), ``wb_sales.srid`` (a sale is keyed by its ``sale_id``) and ``kb_articles.published_at``.
"""

from alembic import op

revision = "0010_wb_optional_fields"
down_revision = "0009_engines_prices_replies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE wb_orders ALTER COLUMN total_price DROP NOT NULL;
        ALTER TABLE wb_sales ALTER COLUMN srid DROP NOT NULL;
        ALTER TABLE kb_articles ALTER COLUMN published_at DROP NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE kb_articles ALTER COLUMN published_at SET NOT NULL;
        ALTER TABLE wb_sales ALTER COLUMN srid SET NOT NULL;
        ALTER TABLE wb_orders ALTER COLUMN total_price SET NOT NULL;
        """
    )
