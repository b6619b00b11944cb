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
-- Parameters: as in rnp_sales.sql.
WITH keys AS (
    SELECT *
    FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
ads AS (
    SELECT a.cabinet_id, a.day, a.nm_id,
           sum(a.views) AS ad_views,
           sum(a.clicks) AS ad_clicks,
           sum(a.sum) AS ad_spend,
           sum(a.atbs) AS ad_carts,
           sum(a.orders) AS ad_orders,
           sum(a.sum_price) AS ad_orders_sum
    FROM keys k
    JOIN ad_campaign_stats a ON a.cabinet_id = k.cabinet_id AND a.day = k.day
    GROUP BY a.cabinet_id, a.day, a.nm_id
),
computed AS (
    SELECT cabinet_id, day, nm_id, ad_views, ad_clicks, ad_spend, ad_carts, ad_orders, ad_orders_sum,
           round(100.0 * ad_clicks / nullif(ad_views, 0), 2) AS ad_ctr_percent,
           round(ad_spend / nullif(ad_clicks, 0), 2) AS ad_cpc,
           round(1000 * ad_spend / nullif(ad_views, 0), 2) AS ad_cpm
    FROM ads
),
written AS (
    -- Rows whose values changed (or are new); the others are left alone (no new row version).
    INSERT INTO rnp_ads AS t (
        cabinet_id, day, nm_id, ad_views, ad_clicks, ad_spend, ad_carts, ad_orders, ad_orders_sum,
        ad_ctr_percent, ad_cpc, ad_cpm
    )
    SELECT
        c.cabinet_id, c.day, c.nm_id, c.ad_views, c.ad_clicks, c.ad_spend, c.ad_carts, c.ad_orders,
        c.ad_orders_sum, c.ad_ctr_percent, c.ad_cpc, c.ad_cpm
    FROM computed c JOIN keys k USING (cabinet_id, day)
    WHERE k.covered
    ON CONFLICT (cabinet_id, day, nm_id) DO UPDATE SET
        ad_views = EXCLUDED.ad_views, ad_clicks = EXCLUDED.ad_clicks, ad_spend = EXCLUDED.ad_spend,
        ad_carts = EXCLUDED.ad_carts, ad_orders = EXCLUDED.ad_orders, ad_orders_sum = EXCLUDED.ad_orders_sum,
        ad_ctr_percent = EXCLUDED.ad_ctr_percent, ad_cpc = EXCLUDED.ad_cpc, ad_cpm = EXCLUDED.ad_cpm,
        updated_at = now()
    WHERE (
        t.ad_views, t.ad_clicks, t.ad_spend, t.ad_carts, t.ad_orders, t.ad_orders_sum, t.ad_ctr_percent,
        t.ad_cpc, t.ad_cpm
    ) IS DISTINCT FROM (
        EXCLUDED.ad_views, EXCLUDED.ad_clicks, EXCLUDED.ad_spend, EXCLUDED.ad_carts, EXCLUDED.ad_orders,
        EXCLUDED.ad_orders_sum, EXCLUDED.ad_ctr_percent, EXCLUDED.ad_cpc, EXCLUDED.ad_cpm
    )
    RETURNING 1
),
removed AS (
    -- Rows of the requested partitions that no longer exist upstream.
    DELETE FROM rnp_ads AS t
    USING keys k
    WHERE t.cabinet_id = k.cabinet_id AND t.day = k.day
      AND NOT EXISTS (SELECT 1 FROM computed c WHERE (c.cabinet_id, c.day, c.nm_id) = (t.cabinet_id, t.day, t.nm_id))
    RETURNING 1
)
SELECT (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE k.covered) AS rows_kept,
       (SELECT count(*) FROM written) AS rows_changed,
       (SELECT count(*) FROM removed) AS rows_removed,
       (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE NOT k.covered) AS rows_dropped
