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
-- %(first)s..%(last)s. The recompute (mart/recompute.py, sql/delta.sql...) puts them before the write it shares with the
-- other three tables, which keeps the rows of the run's (cabinet, day) pairs and makes the table's
-- rows equal to them, touching only rows that change. Feeds are read by cabinet and day range, not
-- joined pair by pair, so that the planner's row estimates (and its choice of joins) are right.
--
-- Money is summed as numeric with sum(), which is exact whatever the amounts' decimals, and given at
-- least two decimals (+ 0.00: an amount's kopecks are shown even when WB sent whole rubles). In a
-- streaming GroupAggregate (below) a numeric sum keeps one running state at a time; summing
-- kopecks as bigint instead (migration 0014's rnp_kopecks and rnp_sum, with a numeric rest for
-- amounts of more decimals) paid a multiplication and a cast per amount and two aggregates per
-- column, and cost a 45-day half of bench/rnp_recompute.py 0.1-0.15 s more per rollup.
--
-- The feed rows are aggregated in key order (the subqueries' ORDER BY, an incremental sort of the
-- (cabinet_id, day) index order by nm_id): a GroupAggregate streams where a HashAggregate keeps a
-- state per group, and the rows come out, and are written, in the order of the table's primary key
-- (but for the days' products with sales and no orders, which the full join adds at the end), so
-- each insert lands next to the previous one in the b-tree instead of on a random leaf (a 45-day
-- half of bench/rnp_recompute.py: rnp_sales 1.9 → 1.4 s of CPU, and rnp_daily, which reads the
-- rollups in heap order, 2.6 → 2.1 s).
orders AS (
    SELECT cabinet_id, day, nm_id,
           count(*) AS orders_count,
           sum(price) AS orders_sum,
           count(*) FILTER (WHERE is_cancel) AS cancellations_count,
           sum(price) FILTER (WHERE is_cancel) AS cancellations_sum,
           sum(spp) AS spp_sum,
           count(spp) AS spp_count
    FROM (
        SELECT o.cabinet_id, o.day, o.nm_id, o.is_cancel, o.price_with_disc AS price, o.spp
        FROM wb_orders o
        WHERE o.cabinet_id = ANY(%(cabinet_ids)s) AND o.day BETWEEN %(first)s AND %(last)s
        ORDER BY o.cabinet_id, o.day, o.nm_id
        OFFSET 0
    ) o
    GROUP BY cabinet_id, day, nm_id
),
sales AS (
    SELECT cabinet_id, day, nm_id,
           count(*) FILTER (WHERE NOT is_return) AS buyouts_count,
           sum(price) FILTER (WHERE NOT is_return) AS buyouts_sum,
           count(*) FILTER (WHERE is_return) AS returns_count,
           sum(abs(price)) FILTER (WHERE is_return) AS returns_sum
    FROM (
        SELECT s.cabinet_id, s.day, s.nm_id, s.is_return, s.price_with_disc AS price
        FROM wb_sales s
        WHERE s.cabinet_id = ANY(%(cabinet_ids)s) AND s.day BETWEEN %(first)s AND %(last)s
        ORDER BY s.cabinet_id, s.day, s.nm_id
        OFFSET 0
    ) s
    GROUP BY cabinet_id, day, nm_id
),
money AS (
    SELECT cabinet_id, day, nm_id,
           coalesce(orders_count, 0) AS orders_count,
           coalesce(orders_sum, 0) + 0.00 AS orders_sum,
           coalesce(cancellations_count, 0) AS cancellations_count,
           coalesce(cancellations_sum, 0) + 0.00 AS cancellations_sum,
           coalesce(buyouts_count, 0) AS buyouts_count,
           coalesce(buyouts_sum, 0) + 0.00 AS buyouts_sum,
           coalesce(returns_count, 0) AS returns_count,
           coalesce(returns_sum, 0) + 0.00 AS returns_sum,
           coalesce(spp_sum, 0) + 0.00 AS spp_sum,
           spp_count
    FROM orders FULL JOIN sales USING (cabinet_id, day, nm_id)
    OFFSET 0
),
computed AS (
    SELECT cabinet_id, day, nm_id, orders_count, orders_sum, cancellations_count, cancellations_sum,
           buyouts_count, buyouts_sum, returns_count, returns_sum,
           round(orders_sum / nullif(orders_count, 0), 2) AS avg_order_price,
           round(spp_sum / nullif(spp_count, 0), 2) AS avg_spp_percent
    FROM money
)
