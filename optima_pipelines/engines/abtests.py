"""A/B test metrics: each variant of a running test, over its period, from the synced ads and funnel data.

A test (``ab_tests``) is one product (``nm_id``) of a cabinet; its variants (``ab_test_variants``)
are the periods (Moscow days, inclusive) in which the product showed each variant (a main photo, a
title, a price...). ``collect`` recomputes, in one set-based statement, one ``ab_test_results`` row
per variant that has started, over its days up to today:

- ads (``ad_campaign_stats``, every campaign of the product): views, clicks, CTR = clicks / views,
  spend, ad orders, CPC = spend / clicks, CPO = spend / ad orders;
- the funnel (``rnp_funnel_stats``): card opens, add-to-cart, orders, order sum, buyouts, and the
  conversions add-to-cart / opens, orders / add-to-cart, orders / opens (percent);
- ``days`` (the period's days so far) and ``days_with_data`` (of those, days with ad or funnel
  rows), and orders per day, so that variants of different lengths compare fairly.

No WB call: the ads sync (every 5 min) and the funnel sync (hourly) bring the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import psycopg

COLLECT_SQL = """
WITH v AS (
    SELECT t.id AS test_id, v.id AS variant_id, t.cabinet_id, t.nm_id, v.date_from, v.date_to,
           least(v.date_to, %(today)s::date) AS last_day
    FROM ab_tests t JOIN ab_test_variants v ON v.test_id = t.id
    WHERE t.status = 'running' AND v.date_from <= %(today)s::date
      AND (%(tests)s::bigint[] IS NULL OR t.id = ANY(%(tests)s::bigint[]))
), ads AS (
    SELECT v.variant_id, sum(s.views) AS views, sum(s.clicks) AS clicks, sum(s.sum) AS spend,
           sum(s.orders) AS orders, array_agg(DISTINCT s.day) AS days
    FROM v JOIN ad_campaign_stats s
      ON s.cabinet_id = v.cabinet_id AND s.nm_id = v.nm_id AND s.day BETWEEN v.date_from AND v.last_day
    GROUP BY v.variant_id
), funnel AS (
    SELECT v.variant_id, sum(f.open_count) AS opens, sum(f.cart_count) AS carts, sum(f.order_count) AS orders,
           sum(f.order_sum) AS order_sum, sum(f.buyout_count) AS buyouts, array_agg(DISTINCT f.day) AS days
    FROM v JOIN rnp_funnel_stats f
      ON f.cabinet_id = v.cabinet_id AND f.nm_id = v.nm_id AND f.day BETWEEN v.date_from AND v.last_day
    GROUP BY v.variant_id
), m AS (
    SELECT v.*, (v.last_day - v.date_from + 1) AS days,
           (SELECT count(DISTINCT d) FROM unnest(coalesce(a.days, '{}'::date[]) || coalesce(f.days, '{}'::date[])) d)
               AS days_with_data,
           coalesce(a.views, 0) AS views, coalesce(a.clicks, 0) AS clicks, coalesce(a.spend, 0) AS spend,
           coalesce(a.orders, 0) AS ad_orders, coalesce(f.opens, 0) AS opens, coalesce(f.carts, 0) AS carts,
           coalesce(f.orders, 0) AS orders, coalesce(f.order_sum, 0) AS order_sum, coalesce(f.buyouts, 0) AS buyouts
    FROM v LEFT JOIN ads a USING (variant_id) LEFT JOIN funnel f USING (variant_id)
)
INSERT INTO ab_test_results AS r (
    test_id, variant_id, cabinet_id, nm_id, date_from, date_to, days, days_with_data, views, clicks, ctr,
    ad_spend, ad_orders, cpc, cpo, card_opens, add_to_cart, orders, order_sum, buyouts, add_to_cart_conversion,
    cart_to_order_conversion, open_to_order_conversion, orders_per_day, computed_at
)
SELECT test_id, variant_id, cabinet_id, nm_id, date_from, date_to, days, days_with_data, views, clicks,
       round(clicks * 100.0 / nullif(views, 0), 2), spend, ad_orders,
       round(spend / nullif(clicks, 0), 2), round(spend / nullif(ad_orders, 0), 2),
       opens, carts, orders, order_sum, buyouts,
       round(carts * 100.0 / nullif(opens, 0), 2), round(orders * 100.0 / nullif(carts, 0), 2),
       round(orders * 100.0 / nullif(opens, 0), 2), round(orders::numeric / nullif(days, 0), 2), now()
FROM m
ON CONFLICT (test_id, variant_id) DO UPDATE SET
    cabinet_id = EXCLUDED.cabinet_id, nm_id = EXCLUDED.nm_id, date_from = EXCLUDED.date_from,
    date_to = EXCLUDED.date_to, days = EXCLUDED.days, days_with_data = EXCLUDED.days_with_data,
    views = EXCLUDED.views, clicks = EXCLUDED.clicks, ctr = EXCLUDED.ctr, ad_spend = EXCLUDED.ad_spend,
    ad_orders = EXCLUDED.ad_orders, cpc = EXCLUDED.cpc, cpo = EXCLUDED.cpo, card_opens = EXCLUDED.card_opens,
    add_to_cart = EXCLUDED.add_to_cart, orders = EXCLUDED.orders, order_sum = EXCLUDED.order_sum,
    buyouts = EXCLUDED.buyouts, add_to_cart_conversion = EXCLUDED.add_to_cart_conversion,
    cart_to_order_conversion = EXCLUDED.cart_to_order_conversion,
    open_to_order_conversion = EXCLUDED.open_to_order_conversion, orders_per_day = EXCLUDED.orders_per_day,
    computed_at = EXCLUDED.computed_at
"""


def running_tests(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM ab_tests WHERE status = 'running'").fetchone()
    return int(row[0]) if row else 0


def collect(conn: psycopg.Connection, today: date, tests: Sequence[int] | None = None) -> int:
    """Recompute the results of every started variant of the running tests (or of ``tests``); rows written."""
    cur = conn.execute(COLLECT_SQL, {"today": today, "tests": list(tests) if tests is not None else None})
    return cur.rowcount
