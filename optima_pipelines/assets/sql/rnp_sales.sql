-- rnp_sales: the sales domain of the РНП, one row per cabinet × Moscow day × product (nm_id).
--
-- Orders stay on the Moscow day they were placed (wb_orders.day, from WB's "date"): a cancellation
-- that arrives weeks later changes that day, as in WB's own funnel. Buyouts and returns are counted
-- on the Moscow day of the sale or return itself (wb_sales.day): that is the day WB's sales report
-- shows them and the day the seller's money moves, and it keeps a past day's buyouts stable
-- instead of growing for weeks. The buyout share by order date is in the funnel columns.
--
--   orders_count         count of wb_orders rows of the day (one row = one unit), cancelled ones included
--   orders_sum           sum of wb_orders.price_with_disc (price after the seller's discount, before WB's SPP)
--   cancellations_count  of those orders, the ones with wb_orders.is_cancel
--   cancellations_sum    sum of wb_orders.price_with_disc of the cancelled ones
--   buyouts_count        count of wb_sales rows of the day with is_return = false (saleID S...)
--   buyouts_sum          sum of wb_sales.price_with_disc of those
--   returns_count        count of wb_sales rows of the day with is_return = true (saleID R...)
--   returns_sum          sum of abs(wb_sales.price_with_disc) of those (WB does not document the sign)
--   avg_order_price      orders_sum / orders_count, rounded to the kopeck
--   avg_spp_percent      mean of wb_orders.spp over the day's orders that carry it, 2 decimals
--
-- The form of this file (the same in rnp_ads, rnp_finance and rnp_daily): common table expressions
-- that end in `computed`, the table's rows for the run's cabinets (%(cabinet_ids)s) and days
-- %(first)s..%(last)s. The recompute (assets/rnp.py) puts them before the write it shares with the
-- other three tables, which keeps the rows of the run's (cabinet, day) pairs and makes the table's
-- rows equal to them, touching only rows that change. Feeds are read by cabinet and day range, not
-- joined pair by pair, so that the planner's row estimates (and its choice of joins) are right.
orders AS (
    SELECT o.cabinet_id, o.day, o.nm_id,
           count(*) AS orders_count,
           coalesce(sum(o.price_with_disc), 0) AS orders_sum,
           count(*) FILTER (WHERE o.is_cancel) AS cancellations_count,
           coalesce(sum(o.price_with_disc) FILTER (WHERE o.is_cancel), 0) AS cancellations_sum,
           avg(o.spp) AS avg_spp
    FROM wb_orders o
    WHERE o.cabinet_id = ANY(%(cabinet_ids)s) AND o.day BETWEEN %(first)s AND %(last)s
    GROUP BY o.cabinet_id, o.day, o.nm_id
),
sales AS (
    SELECT s.cabinet_id, s.day, s.nm_id,
           count(*) FILTER (WHERE NOT s.is_return) AS buyouts_count,
           coalesce(sum(s.price_with_disc) FILTER (WHERE NOT s.is_return), 0) AS buyouts_sum,
           count(*) FILTER (WHERE s.is_return) AS returns_count,
           coalesce(sum(abs(s.price_with_disc)) FILTER (WHERE s.is_return), 0) AS returns_sum
    FROM wb_sales s
    WHERE s.cabinet_id = ANY(%(cabinet_ids)s) AND s.day BETWEEN %(first)s AND %(last)s
    GROUP BY s.cabinet_id, s.day, s.nm_id
),
computed AS (
    SELECT cabinet_id, day, nm_id,
           coalesce(orders_count, 0) AS orders_count,
           coalesce(orders_sum, 0) AS orders_sum,
           coalesce(cancellations_count, 0) AS cancellations_count,
           coalesce(cancellations_sum, 0) AS cancellations_sum,
           coalesce(buyouts_count, 0) AS buyouts_count,
           coalesce(buyouts_sum, 0) AS buyouts_sum,
           coalesce(returns_count, 0) AS returns_count,
           coalesce(returns_sum, 0) AS returns_sum,
           round(orders_sum / nullif(orders_count, 0), 2) AS avg_order_price,
           round(avg_spp, 2) AS avg_spp_percent
    FROM orders FULL JOIN sales USING (cabinet_id, day, nm_id)
)
