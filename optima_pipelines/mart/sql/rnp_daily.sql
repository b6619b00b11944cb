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
-- The form of this file: see rnp_sales.sql. The stock is summed with rnp_sum (a bigint sum, see rnp_ads.sql).
sales AS (
    SELECT s.* FROM rnp_sales s WHERE s.cabinet_id = ANY(%(cabinet_ids)s) AND s.day BETWEEN %(first)s AND %(last)s
),
ads AS (
    SELECT a.* FROM rnp_ads a WHERE a.cabinet_id = ANY(%(cabinet_ids)s) AND a.day BETWEEN %(first)s AND %(last)s
),
finance AS (
    SELECT f.* FROM rnp_finance f WHERE f.cabinet_id = ANY(%(cabinet_ids)s) AND f.day BETWEEN %(first)s AND %(last)s
),
funnel AS (
    SELECT f.cabinet_id, f.day, f.nm_id, f.open_count, f.cart_count, f.add_to_cart_conversion,
           f.cart_to_order_conversion, f.buyout_percent
    FROM rnp_funnel_stats f
    WHERE f.cabinet_id = ANY(%(cabinet_ids)s) AND f.day BETWEEN %(first)s AND %(last)s
),
stock AS (
    SELECT st.cabinet_id, st.day, st.nm_id,
           rnp_sum(st.quantity) AS stock_qty,
           rnp_sum(st.in_way_to_client) AS stock_in_way_to_client,
           rnp_sum(st.in_way_from_client) AS stock_in_way_from_client
    FROM stocks st
    WHERE st.cabinet_id = ANY(%(cabinet_ids)s) AND st.day BETWEEN %(first)s AND %(last)s
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
)
