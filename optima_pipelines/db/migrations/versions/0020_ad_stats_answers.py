"""What WB's latest fullstats answer said per campaign and Moscow day: ``ad_stats_answers``.

Revision ID: 0020_ad_stats_answers
Revises: 0019_feed_freshness

WB's ``/adv/v3/fullstats`` answer is the whole truth for the campaigns and days it was asked about
(docs/data.md, "Snapshots and streams"): the ad sync replaces those campaigns' rows of those days in
``ad_campaign_stats`` with the answer, removing the rows it no longer holds (issue 38: a revised
day that lost an app's row kept the old row, and its spend and orders). In the same transaction it
records here, for every (campaign, day) of the question, what the answer said: its rows, spend and
orders summed from the answer itself (not from the table), when, and by which run. A campaign the
answer left out of a day has a row with 0 rows: WB said nothing, which is not the same as never
asked (no row).

A check of the mart's ad spend against "what WB last said" reads this table: per (cabinet, day),
``sum(spend)`` here against ``sum(rnp_daily.ad_spend)``. It is written from the answer, so a load
that failed to replace its scope (the bug above) shows as a mismatch, which a check against
``ad_campaign_stats`` itself cannot see.
"""

from __future__ import annotations

from alembic import op

revision = "0020_ad_stats_answers"
down_revision = "0019_feed_freshness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE ad_stats_answers (
            cabinet_id   text NOT NULL,
            advert_id    bigint NOT NULL,
            day          date NOT NULL,
            rows         integer NOT NULL,              -- the answer's (app, product) rows of the day
            spend        numeric NOT NULL,              -- sum of their "sum", rubles
            orders       bigint NOT NULL,               -- sum of their "orders"
            orders_sum   numeric NOT NULL,              -- sum of their "sum_price", rubles
            answered_at  timestamptz NOT NULL DEFAULT now(),
            run_id       text,
            PRIMARY KEY (cabinet_id, advert_id, day)
        );
        CREATE INDEX ad_stats_answers_day_idx ON ad_stats_answers (cabinet_id, day);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS ad_stats_answers")
