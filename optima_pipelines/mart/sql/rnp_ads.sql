-- rnp_ads: the advertising domain of the РНП, one row per cabinet × Moscow day × product (nm_id).
--
-- Every ad_campaign_stats row of the day counts: all campaigns and all apps (site, Android, iOS),
-- and "associated" products too (is_associated: shown or bought through a campaign that does not
-- list them). WB reports their views, clicks, orders and spend under the product that got them,
-- and that spend is part of what the cabinet paid, so the day's ad_spend adds up to WB's.
--
--   ad_views        sum of ad_campaign_stats.views
--   ad_clicks       sum of ad_campaign_stats.clicks
--   ad_spend        sum of ad_campaign_stats.sum (rubles)
--   ad_carts        sum of ad_campaign_stats.atbs (add-to-basket from ads)
--   ad_orders       sum of ad_campaign_stats.orders
--   ad_orders_sum   sum of ad_campaign_stats.sum_price (value of the orders from ads, rubles)
--   ad_ctr_percent  100 * ad_clicks / ad_views, 2 decimals (NULL without views)
--   ad_cpc          ad_spend / ad_clicks, to the kopeck (NULL without clicks)
--   ad_cpm          1000 * ad_spend / ad_views, to the kopeck (NULL without views)
--
-- The form of this file, the money sums and the rows aggregated in key order: see rnp_sales.sql.
-- The counters are summed with rnp_sum (a bigint sum with a by-value state, migration 0014:
-- sum(bigint) would keep a numeric state per group).
ads AS (
    SELECT cabinet_id, day, nm_id,
           rnp_sum(views) AS ad_views,
           rnp_sum(clicks) AS ad_clicks,
           sum(spend) AS ad_spend,
           rnp_sum(atbs) AS ad_carts,
           rnp_sum(orders) AS ad_orders,
           sum(orders_sum) AS ad_orders_sum
    FROM (
        SELECT a.cabinet_id, a.day, a.nm_id, a.views, a.clicks, a.atbs, a.orders, a.sum AS spend,
               a.sum_price AS orders_sum
        FROM ad_campaign_stats a
        WHERE a.cabinet_id = ANY(%(cabinet_ids)s) AND a.day BETWEEN %(first)s AND %(last)s
        ORDER BY a.cabinet_id, a.day, a.nm_id
        OFFSET 0
    ) a
    GROUP BY cabinet_id, day, nm_id
),
money AS (
    SELECT cabinet_id, day, nm_id, ad_views, ad_clicks, coalesce(ad_spend, 0) + 0.00 AS ad_spend, ad_carts,
           ad_orders, coalesce(ad_orders_sum, 0) + 0.00 AS ad_orders_sum
    FROM ads
    OFFSET 0
),
computed AS (
    SELECT cabinet_id, day, nm_id, ad_views, ad_clicks, ad_spend, ad_carts, ad_orders, ad_orders_sum,
           round(100.0 * ad_clicks / nullif(ad_views, 0), 2) AS ad_ctr_percent,
           round(ad_spend / nullif(ad_clicks, 0), 2) AS ad_cpc,
           round(1000 * ad_spend / nullif(ad_views, 0), 2) AS ad_cpm
    FROM money
)
