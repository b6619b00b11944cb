"""The РНП mart (rnp_daily) and its three rollups, range-partitioned by month.

Revision ID: 0004_rnp
Revises: 0003_feeds

One row per cabinet × Moscow day × product (nm_id; 0 for finance lines tied to no product).
Written only by the re-aggregation assets (optima_pipelines/assets/rnp.py), which replace a
(cabinet, day)'s rows in one transaction; column definitions are in mart/sql/rnp_*.sql and in
docs/data.md. Each table is PARTITION BY RANGE (day) with one partition per calendar
month, named <table>_pYYYYMM; the weekly partition-manager (jobs/partition_manager.py) keeps them
from the retention horizon to three months ahead. This migration creates that same window once, so
that a fresh deployment can write at once; its month arithmetic is repeated here on purpose, so
that the migration keeps doing what it did when the manager changes.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from alembic import op

revision = "0004_rnp"
down_revision = "0003_feeds"
branch_labels = None
depends_on = None

TABLES = ("rnp_sales", "rnp_ads", "rnp_finance", "rnp_daily")
MONTHS_AHEAD = 3


def _add_months(first_of_month: date, months: int) -> date:
    index = first_of_month.year * 12 + first_of_month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _initial_months() -> list[date]:
    retention = int(os.environ.get("OPTIMA_PARTITION_RETENTION_MONTHS", "").strip() or 24)
    today = datetime.now(UTC).astimezone(ZoneInfo("Europe/Moscow")).date()
    this_month = today.replace(day=1)
    first = _add_months(this_month, -max(retention, 3))
    count = (this_month.year - first.year) * 12 + this_month.month - first.month + MONTHS_AHEAD + 1
    return [_add_months(first, i) for i in range(count)]


def upgrade() -> None:
    op.execute(
        """
        -- Sales domain: wb_orders by the order's Moscow day, wb_sales by the sale's Moscow day.
        CREATE TABLE rnp_sales (
            cabinet_id           text NOT NULL,
            day                  date NOT NULL,
            nm_id                bigint NOT NULL,
            orders_count         bigint NOT NULL,
            orders_sum           numeric NOT NULL,
            cancellations_count  bigint NOT NULL,
            cancellations_sum    numeric NOT NULL,
            buyouts_count        bigint NOT NULL,
            buyouts_sum          numeric NOT NULL,
            returns_count        bigint NOT NULL,
            returns_sum          numeric NOT NULL,
            avg_order_price      numeric,
            avg_spp_percent      numeric,
            updated_at           timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, day, nm_id)
        ) PARTITION BY RANGE (day);

        -- Ads domain: ad_campaign_stats, every campaign and app of the day.
        CREATE TABLE rnp_ads (
            cabinet_id      text NOT NULL,
            day             date NOT NULL,
            nm_id           bigint NOT NULL,
            ad_views        bigint NOT NULL,
            ad_clicks       bigint NOT NULL,
            ad_spend        numeric NOT NULL,
            ad_carts        bigint NOT NULL,
            ad_orders       bigint NOT NULL,
            ad_orders_sum   numeric NOT NULL,
            ad_ctr_percent  numeric,
            ad_cpc          numeric,
            ad_cpm          numeric,
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, day, nm_id)
        ) PARTITION BY RANGE (day);

        -- Finance domain: wb_report_lines on the Moscow day of the line's source order.
        CREATE TABLE rnp_finance (
            cabinet_id        text NOT NULL,
            day               date NOT NULL,
            nm_id             bigint NOT NULL,
            realization       numeric NOT NULL,
            payout            numeric NOT NULL,
            commission        numeric NOT NULL,
            acquiring         numeric NOT NULL,
            logistics         numeric NOT NULL,
            storage           numeric NOT NULL,
            acceptance        numeric NOT NULL,
            penalties         numeric NOT NULL,
            other_deductions  numeric NOT NULL,
            finance_lines     bigint NOT NULL,
            updated_at        timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, day, nm_id)
        ) PARTITION BY RANGE (day);

        -- The mart: the three rollups, the funnel and the day's stock side by side. Additive figures
        -- of a domain with no row that day are 0; ratios with a zero denominator, and the funnel and
        -- stock of a day with no snapshot, are NULL (unknown, not zero).
        CREATE TABLE rnp_daily (
            cabinet_id                        text NOT NULL,
            day                               date NOT NULL,
            nm_id                             bigint NOT NULL,
            orders_count                      bigint NOT NULL,
            orders_sum                        numeric NOT NULL,
            cancellations_count               bigint NOT NULL,
            cancellations_sum                 numeric NOT NULL,
            buyouts_count                     bigint NOT NULL,
            buyouts_sum                       numeric NOT NULL,
            returns_count                     bigint NOT NULL,
            returns_sum                       numeric NOT NULL,
            avg_order_price                   numeric,
            avg_spp_percent                   numeric,
            ad_views                          bigint NOT NULL,
            ad_clicks                         bigint NOT NULL,
            ad_spend                          numeric NOT NULL,
            ad_carts                          bigint NOT NULL,
            ad_orders                         bigint NOT NULL,
            ad_orders_sum                     numeric NOT NULL,
            ad_ctr_percent                    numeric,
            ad_cpc                            numeric,
            ad_cpm                            numeric,
            drr_of_orders_sum_percent         numeric,
            drr_of_ad_orders_sum_percent      numeric,
            realization                       numeric NOT NULL,
            payout                            numeric NOT NULL,
            commission                        numeric NOT NULL,
            acquiring                         numeric NOT NULL,
            logistics                         numeric NOT NULL,
            storage                           numeric NOT NULL,
            acceptance                        numeric NOT NULL,
            penalties                         numeric NOT NULL,
            other_deductions                  numeric NOT NULL,
            card_opens                        bigint,
            add_to_cart                       bigint,
            add_to_cart_conversion_percent    numeric,
            cart_to_order_conversion_percent  numeric,
            funnel_buyout_percent             numeric,
            stock_qty                         bigint,
            stock_in_way_to_client            bigint,
            stock_in_way_from_client          bigint,
            updated_at                        timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (cabinet_id, day, nm_id)
        ) PARTITION BY RANGE (day);
        """
    )
    for table in TABLES:
        for month in _initial_months():
            end = _add_months(month, 1)
            op.execute(
                f"CREATE TABLE {table}_p{month:%Y%m} PARTITION OF {table} "
                f"FOR VALUES FROM ('{month.isoformat()}') TO ('{end.isoformat()}')"
            )


def downgrade() -> None:
    op.execute("DROP TABLE rnp_daily, rnp_finance, rnp_ads, rnp_sales")
