-- rnp_daily: the РНП mart, one row per cabinet × Moscow day × product (nm_id) that has any figure
-- that day: the three rollups (rnp_sales, rnp_ads, rnp_finance, see their .sql files for every
-- column's definition), the funnel and the day's stock, side by side.
--
-- Additive figures of a domain without a row that day are 0 (the feeds are complete: no row means
-- none happened). The funnel and the stock come from snapshots WB may not have given for a day:
-- without one they are NULL (unknown), not 0. Columns added here:
--
--   drr_of_orders_sum_percent         ДРР against all orders: 100 * ad_spend / orders_sum (0 with orders and no
--                                     ads; NULL when orders_sum = 0)
--   drr_of_ad_orders_sum_percent      ДРР against orders from ads: 100 * ad_spend / ad_orders_sum (NULL when 0)
--   card_opens                        rnp_funnel_stats.open_count (card opens)
--   add_to_cart                       rnp_funnel_stats.cart_count
--   add_to_cart_conversion_percent    rnp_funnel_stats.add_to_cart_conversion (WB's figure, percent)
--   cart_to_order_conversion_percent  rnp_funnel_stats.cart_to_order_conversion (WB's figure, percent)
--   funnel_buyout_percent             rnp_funnel_stats.buyout_percent (WB's, buyouts by order date)
--   stock_qty                         sum of stocks.quantity over sizes and warehouses, the day's last snapshot
--   stock_in_way_to_client            sum of stocks.in_way_to_client, same snapshot
--   stock_in_way_from_client          sum of stocks.in_way_from_client, same snapshot
--
-- Parameters: as in rnp_sales.sql.
WITH keys AS (
    SELECT *
    FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
sales AS (
    SELECT s.* FROM keys k JOIN rnp_sales s ON s.cabinet_id = k.cabinet_id AND s.day = k.day
),
ads AS (
    SELECT a.* FROM keys k JOIN rnp_ads a ON a.cabinet_id = k.cabinet_id AND a.day = k.day
),
finance AS (
    SELECT f.* FROM keys k JOIN rnp_finance f ON f.cabinet_id = k.cabinet_id AND f.day = k.day
),
funnel AS (
    SELECT f.cabinet_id, f.day, f.nm_id, f.open_count, f.cart_count, f.add_to_cart_conversion,
           f.cart_to_order_conversion, f.buyout_percent
    FROM keys k JOIN rnp_funnel_stats f ON f.cabinet_id = k.cabinet_id AND f.day = k.day
),
stock AS (
    SELECT st.cabinet_id, st.day, st.nm_id,
           sum(st.quantity) AS stock_qty,
           sum(st.in_way_to_client) AS stock_in_way_to_client,
           sum(st.in_way_from_client) AS stock_in_way_from_client
    FROM keys k JOIN stocks st ON st.cabinet_id = k.cabinet_id AND st.day = k.day
    GROUP BY st.cabinet_id, st.day, st.nm_id
),
computed AS (
    SELECT cabinet_id, day, nm_id,
           coalesce(sales.orders_count, 0) AS orders_count,
           coalesce(sales.orders_sum, 0) AS orders_sum,
           coalesce(sales.cancellations_count, 0) AS cancellations_count,
           coalesce(sales.cancellations_sum, 0) AS cancellations_sum,
           coalesce(sales.buyouts_count, 0) AS buyouts_count,
           coalesce(sales.buyouts_sum, 0) AS buyouts_sum,
           coalesce(sales.returns_count, 0) AS returns_count,
           coalesce(sales.returns_sum, 0) AS returns_sum,
           sales.avg_order_price,
           sales.avg_spp_percent,
           coalesce(ads.ad_views, 0) AS ad_views,
           coalesce(ads.ad_clicks, 0) AS ad_clicks,
           coalesce(ads.ad_spend, 0) AS ad_spend,
           coalesce(ads.ad_carts, 0) AS ad_carts,
           coalesce(ads.ad_orders, 0) AS ad_orders,
           coalesce(ads.ad_orders_sum, 0) AS ad_orders_sum,
           ads.ad_ctr_percent,
           ads.ad_cpc,
           ads.ad_cpm,
           round(100 * coalesce(ads.ad_spend, 0) / nullif(sales.orders_sum, 0), 2) AS drr_of_orders_sum_percent,
           round(100 * ads.ad_spend / nullif(ads.ad_orders_sum, 0), 2) AS drr_of_ad_orders_sum_percent,
           coalesce(finance.realization, 0) AS realization,
           coalesce(finance.payout, 0) AS payout,
           coalesce(finance.commission, 0) AS commission,
           coalesce(finance.acquiring, 0) AS acquiring,
           coalesce(finance.logistics, 0) AS logistics,
           coalesce(finance.storage, 0) AS storage,
           coalesce(finance.acceptance, 0) AS acceptance,
           coalesce(finance.penalties, 0) AS penalties,
           coalesce(finance.other_deductions, 0) AS other_deductions,
           funnel.open_count AS card_opens,
           funnel.cart_count AS add_to_cart,
           funnel.add_to_cart_conversion AS add_to_cart_conversion_percent,
           funnel.cart_to_order_conversion AS cart_to_order_conversion_percent,
           funnel.buyout_percent AS funnel_buyout_percent,
           stock.stock_qty,
           stock.stock_in_way_to_client,
           stock.stock_in_way_from_client
    FROM sales
    FULL JOIN ads USING (cabinet_id, day, nm_id)
    FULL JOIN finance USING (cabinet_id, day, nm_id)
    FULL JOIN funnel USING (cabinet_id, day, nm_id)
    FULL JOIN stock USING (cabinet_id, day, nm_id)
),
written AS (
    -- Rows whose values changed (or are new); the others are left alone (no new row version).
    INSERT INTO rnp_daily AS t (
        cabinet_id, day, nm_id, orders_count, orders_sum, cancellations_count, cancellations_sum, buyouts_count,
        buyouts_sum, returns_count, returns_sum, avg_order_price, avg_spp_percent, ad_views, ad_clicks,
        ad_spend, ad_carts, ad_orders, ad_orders_sum, ad_ctr_percent, ad_cpc, ad_cpm, drr_of_orders_sum_percent,
        drr_of_ad_orders_sum_percent, realization, payout, commission, acquiring, logistics, storage,
        acceptance, penalties, other_deductions, card_opens, add_to_cart, add_to_cart_conversion_percent,
        cart_to_order_conversion_percent, funnel_buyout_percent, stock_qty, stock_in_way_to_client,
        stock_in_way_from_client
    )
    SELECT
        c.cabinet_id, c.day, c.nm_id, c.orders_count, c.orders_sum, c.cancellations_count, c.cancellations_sum,
        c.buyouts_count, c.buyouts_sum, c.returns_count, c.returns_sum, c.avg_order_price, c.avg_spp_percent,
        c.ad_views, c.ad_clicks, c.ad_spend, c.ad_carts, c.ad_orders, c.ad_orders_sum, c.ad_ctr_percent,
        c.ad_cpc, c.ad_cpm, c.drr_of_orders_sum_percent, c.drr_of_ad_orders_sum_percent, c.realization,
        c.payout, c.commission, c.acquiring, c.logistics, c.storage, c.acceptance, c.penalties,
        c.other_deductions, c.card_opens, c.add_to_cart, c.add_to_cart_conversion_percent,
        c.cart_to_order_conversion_percent, c.funnel_buyout_percent, c.stock_qty, c.stock_in_way_to_client,
        c.stock_in_way_from_client
    FROM computed c JOIN keys k USING (cabinet_id, day)
    WHERE k.covered
    ON CONFLICT (cabinet_id, day, nm_id) DO UPDATE SET
        orders_count = EXCLUDED.orders_count, orders_sum = EXCLUDED.orders_sum,
        cancellations_count = EXCLUDED.cancellations_count, cancellations_sum = EXCLUDED.cancellations_sum,
        buyouts_count = EXCLUDED.buyouts_count, buyouts_sum = EXCLUDED.buyouts_sum,
        returns_count = EXCLUDED.returns_count, returns_sum = EXCLUDED.returns_sum,
        avg_order_price = EXCLUDED.avg_order_price, avg_spp_percent = EXCLUDED.avg_spp_percent,
        ad_views = EXCLUDED.ad_views, ad_clicks = EXCLUDED.ad_clicks, ad_spend = EXCLUDED.ad_spend,
        ad_carts = EXCLUDED.ad_carts, ad_orders = EXCLUDED.ad_orders, ad_orders_sum = EXCLUDED.ad_orders_sum,
        ad_ctr_percent = EXCLUDED.ad_ctr_percent, ad_cpc = EXCLUDED.ad_cpc, ad_cpm = EXCLUDED.ad_cpm,
        drr_of_orders_sum_percent = EXCLUDED.drr_of_orders_sum_percent,
        drr_of_ad_orders_sum_percent = EXCLUDED.drr_of_ad_orders_sum_percent,
        realization = EXCLUDED.realization, payout = EXCLUDED.payout, commission = EXCLUDED.commission,
        acquiring = EXCLUDED.acquiring, logistics = EXCLUDED.logistics, storage = EXCLUDED.storage,
        acceptance = EXCLUDED.acceptance, penalties = EXCLUDED.penalties,
        other_deductions = EXCLUDED.other_deductions, card_opens = EXCLUDED.card_opens,
        add_to_cart = EXCLUDED.add_to_cart,
        add_to_cart_conversion_percent = EXCLUDED.add_to_cart_conversion_percent,
        cart_to_order_conversion_percent = EXCLUDED.cart_to_order_conversion_percent,
        funnel_buyout_percent = EXCLUDED.funnel_buyout_percent, stock_qty = EXCLUDED.stock_qty,
        stock_in_way_to_client = EXCLUDED.stock_in_way_to_client,
        stock_in_way_from_client = EXCLUDED.stock_in_way_from_client, updated_at = now()
    WHERE (
        t.orders_count, t.orders_sum, t.cancellations_count, t.cancellations_sum, t.buyouts_count,
        t.buyouts_sum, t.returns_count, t.returns_sum, t.avg_order_price, t.avg_spp_percent, t.ad_views,
        t.ad_clicks, t.ad_spend, t.ad_carts, t.ad_orders, t.ad_orders_sum, t.ad_ctr_percent, t.ad_cpc, t.ad_cpm,
        t.drr_of_orders_sum_percent, t.drr_of_ad_orders_sum_percent, t.realization, t.payout, t.commission,
        t.acquiring, t.logistics, t.storage, t.acceptance, t.penalties, t.other_deductions, t.card_opens,
        t.add_to_cart, t.add_to_cart_conversion_percent, t.cart_to_order_conversion_percent,
        t.funnel_buyout_percent, t.stock_qty, t.stock_in_way_to_client, t.stock_in_way_from_client
    ) IS DISTINCT FROM (
        EXCLUDED.orders_count, EXCLUDED.orders_sum, EXCLUDED.cancellations_count, EXCLUDED.cancellations_sum,
        EXCLUDED.buyouts_count, EXCLUDED.buyouts_sum, EXCLUDED.returns_count, EXCLUDED.returns_sum,
        EXCLUDED.avg_order_price, EXCLUDED.avg_spp_percent, EXCLUDED.ad_views, EXCLUDED.ad_clicks,
        EXCLUDED.ad_spend, EXCLUDED.ad_carts, EXCLUDED.ad_orders, EXCLUDED.ad_orders_sum,
        EXCLUDED.ad_ctr_percent, EXCLUDED.ad_cpc, EXCLUDED.ad_cpm, EXCLUDED.drr_of_orders_sum_percent,
        EXCLUDED.drr_of_ad_orders_sum_percent, EXCLUDED.realization, EXCLUDED.payout, EXCLUDED.commission,
        EXCLUDED.acquiring, EXCLUDED.logistics, EXCLUDED.storage, EXCLUDED.acceptance, EXCLUDED.penalties,
        EXCLUDED.other_deductions, EXCLUDED.card_opens, EXCLUDED.add_to_cart,
        EXCLUDED.add_to_cart_conversion_percent, EXCLUDED.cart_to_order_conversion_percent,
        EXCLUDED.funnel_buyout_percent, EXCLUDED.stock_qty, EXCLUDED.stock_in_way_to_client,
        EXCLUDED.stock_in_way_from_client
    )
    RETURNING 1
),
removed AS (
    -- Rows of the requested partitions that no longer exist upstream.
    DELETE FROM rnp_daily AS t
    USING keys k
    WHERE t.cabinet_id = k.cabinet_id AND t.day = k.day
      AND NOT EXISTS (SELECT 1 FROM computed c WHERE (c.cabinet_id, c.day, c.nm_id) = (t.cabinet_id, t.day, t.nm_id))
    RETURNING 1
)
SELECT (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE k.covered) AS rows_kept,
       (SELECT count(*) FROM written) AS rows_changed,
       (SELECT count(*) FROM removed) AS rows_removed,
       (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE NOT k.covered) AS rows_dropped
