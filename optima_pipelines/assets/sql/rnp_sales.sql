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
-- Parameters: the (cabinet, day) pairs to compute, and per pair whether rnp_sales has a partition
-- for the day. The statement makes the pairs' rows equal to what it computes, touching only rows
-- that change; rows of uncovered days are counted (rows_dropped), never written.
WITH keys AS (
    SELECT *
    FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
orders AS (
    SELECT o.cabinet_id, o.day, o.nm_id,
           count(*) AS orders_count,
           coalesce(sum(o.price_with_disc), 0) AS orders_sum,
           count(*) FILTER (WHERE o.is_cancel) AS cancellations_count,
           coalesce(sum(o.price_with_disc) FILTER (WHERE o.is_cancel), 0) AS cancellations_sum,
           avg(o.spp) AS avg_spp
    FROM keys k
    JOIN wb_orders o ON o.cabinet_id = k.cabinet_id AND o.day = k.day
    GROUP BY o.cabinet_id, o.day, o.nm_id
),
sales AS (
    SELECT s.cabinet_id, s.day, s.nm_id,
           count(*) FILTER (WHERE NOT s.is_return) AS buyouts_count,
           coalesce(sum(s.price_with_disc) FILTER (WHERE NOT s.is_return), 0) AS buyouts_sum,
           count(*) FILTER (WHERE s.is_return) AS returns_count,
           coalesce(sum(abs(s.price_with_disc)) FILTER (WHERE s.is_return), 0) AS returns_sum
    FROM keys k
    JOIN wb_sales s ON s.cabinet_id = k.cabinet_id AND s.day = k.day
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
),
written AS (
    -- Rows whose values changed (or are new); the others are left alone (no new row version).
    INSERT INTO rnp_sales AS t (
        cabinet_id, day, nm_id, orders_count, orders_sum, cancellations_count, cancellations_sum, buyouts_count,
        buyouts_sum, returns_count, returns_sum, avg_order_price, avg_spp_percent
    )
    SELECT
        c.cabinet_id, c.day, c.nm_id, c.orders_count, c.orders_sum, c.cancellations_count, c.cancellations_sum,
        c.buyouts_count, c.buyouts_sum, c.returns_count, c.returns_sum, c.avg_order_price, c.avg_spp_percent
    FROM computed c JOIN keys k USING (cabinet_id, day)
    WHERE k.covered
    ON CONFLICT (cabinet_id, day, nm_id) DO UPDATE SET
        orders_count = EXCLUDED.orders_count, orders_sum = EXCLUDED.orders_sum,
        cancellations_count = EXCLUDED.cancellations_count, cancellations_sum = EXCLUDED.cancellations_sum,
        buyouts_count = EXCLUDED.buyouts_count, buyouts_sum = EXCLUDED.buyouts_sum,
        returns_count = EXCLUDED.returns_count, returns_sum = EXCLUDED.returns_sum,
        avg_order_price = EXCLUDED.avg_order_price, avg_spp_percent = EXCLUDED.avg_spp_percent,
        updated_at = now()
    WHERE (
        t.orders_count, t.orders_sum, t.cancellations_count, t.cancellations_sum, t.buyouts_count,
        t.buyouts_sum, t.returns_count, t.returns_sum, t.avg_order_price, t.avg_spp_percent
    ) IS DISTINCT FROM (
        EXCLUDED.orders_count, EXCLUDED.orders_sum, EXCLUDED.cancellations_count, EXCLUDED.cancellations_sum,
        EXCLUDED.buyouts_count, EXCLUDED.buyouts_sum, EXCLUDED.returns_count, EXCLUDED.returns_sum,
        EXCLUDED.avg_order_price, EXCLUDED.avg_spp_percent
    )
    RETURNING 1
),
removed AS (
    -- Rows of the requested partitions that no longer exist upstream.
    DELETE FROM rnp_sales AS t
    USING keys k
    WHERE t.cabinet_id = k.cabinet_id AND t.day = k.day
      AND NOT EXISTS (SELECT 1 FROM computed c WHERE (c.cabinet_id, c.day, c.nm_id) = (t.cabinet_id, t.day, t.nm_id))
    RETURNING 1
)
SELECT (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE k.covered) AS rows_kept,
       (SELECT count(*) FROM written) AS rows_changed,
       (SELECT count(*) FROM removed) AS rows_removed,
       (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE NOT k.covered) AS rows_dropped
