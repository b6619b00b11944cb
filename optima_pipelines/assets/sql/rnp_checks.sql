-- The asset checks of rnp_daily: per (cabinet, day), the mart's totals next to the same figures
-- taken straight from the feeds. The finance attribution is written differently from
-- rnp_finance.sql on purpose (the day is coalesce(order's day, line's own day) over every line that
-- can land on the requested days), so that the check also catches a slip in the rollup, not only
-- rows changed behind its back.
--
-- stale: the feeds changed after the pair's last recompute (its rnp_daily watermark, migration
-- 0012: a feed's write bumps it in the feed's own transaction, so this statement sees either both
-- or neither). A mismatch on a stale pair is the mart waiting for its re-aggregation, not a wrong
-- figure; a pair the recompute never wrote, or that someone else wrote (recomputed NULL), is not.
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
),
mart AS (
    SELECT r.cabinet_id, r.day,
           sum(r.orders_count) AS orders_count, sum(r.orders_sum) AS orders_sum,
           sum(r.ad_spend) AS ad_spend, sum(r.payout) AS payout
    FROM keys k JOIN rnp_daily r ON r.cabinet_id = k.cabinet_id AND r.day = k.day
    GROUP BY r.cabinet_id, r.day
),
orders AS (
    SELECT o.cabinet_id, o.day, count(*) AS orders_count, coalesce(sum(o.price_with_disc), 0) AS orders_sum
    FROM keys k JOIN wb_orders o ON o.cabinet_id = k.cabinet_id AND o.day = k.day
    GROUP BY o.cabinet_id, o.day
),
ads AS (
    SELECT a.cabinet_id, a.day, sum(a.sum) AS ad_spend
    FROM keys k JOIN ad_campaign_stats a ON a.cabinet_id = k.cabinet_id AND a.day = k.day
    GROUP BY a.cabinet_id, a.day
),
candidates AS (
    -- A line lands on a requested day through its own day or through its order's day.
    SELECT l.cabinet_id, l.rrd_id
    FROM keys k JOIN wb_report_lines l ON l.cabinet_id = k.cabinet_id AND l.day = k.day
    UNION
    SELECT l.cabinet_id, l.rrd_id
    FROM keys k
    JOIN wb_orders o ON o.cabinet_id = k.cabinet_id AND o.day = k.day
    JOIN wb_report_lines l ON l.cabinet_id = o.cabinet_id AND l.srid = o.srid
),
attributed AS (
    SELECT l.cabinet_id, coalesce(o.day, l.day) AS day,
           CASE WHEN l.doc_type_name = 'Возврат' THEN -1 ELSE 1 END * coalesce(l.for_pay, 0) AS for_pay
    FROM candidates c
    JOIN wb_report_lines l ON l.cabinet_id = c.cabinet_id AND l.rrd_id = c.rrd_id
    LEFT JOIN wb_orders o ON o.cabinet_id = l.cabinet_id AND o.srid = l.srid
),
payout AS (
    SELECT a.cabinet_id, a.day, sum(a.for_pay) AS payout
    FROM attributed a JOIN keys k ON k.cabinet_id = a.cabinet_id AND k.day = a.day
    GROUP BY a.cabinet_id, a.day
)
SELECT k.cabinet_id, k.day,
       coalesce(w.recomputed <> w.changes, false) AS stale,
       coalesce(mart.orders_count, 0), coalesce(orders.orders_count, 0),
       coalesce(mart.orders_sum, 0), coalesce(orders.orders_sum, 0),
       coalesce(mart.ad_spend, 0), coalesce(ads.ad_spend, 0),
       coalesce(mart.payout, 0), coalesce(payout.payout, 0)
FROM keys k
LEFT JOIN mart USING (cabinet_id, day)
LEFT JOIN orders USING (cabinet_id, day)
LEFT JOIN ads USING (cabinet_id, day)
LEFT JOIN payout USING (cabinet_id, day)
LEFT JOIN rnp_watermarks w ON w.cabinet_id = k.cabinet_id AND w.table_name = 'rnp_daily' AND w.day = k.day
ORDER BY k.cabinet_id, k.day
