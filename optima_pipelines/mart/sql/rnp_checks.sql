-- The asset checks of rnp_daily: per (cabinet, day), the mart's totals next to the same figures
-- taken straight from the feeds (the ad spend: from what WB's latest answers said). The finance attribution is written differently from
-- rnp_finance.sql on purpose (the day is the order's day, and a line without an order its own day,
-- read from wb_orders, not from attributed_day), so that the check also catches a slip in the rollup
-- or in the lines' placement, not only rows changed behind its back.
--
-- Each pair is computed by index probes of its own (LATERAL): a ranged run checks 1,000 cabinets ×
-- 2 days out of tables of every cabinet, where joins of whole tables hashed all of them (3 s; 0.7 s
-- this way, bench of 2026-12-04 on the N = 1,000 scale bench's data).
--
-- stale: the feeds changed after the pair's last recompute of one of the four tables (their
-- watermarks, migration 0012: a feed's write bumps them in the feed's own transaction, so this
-- statement sees either both or neither). The rollups count: a run that merges rnp_daily alone (a
-- funnel change) reads rnp_sales as it is and marks rnp_daily fresh, while an order written since
-- waits for rnp_sales' recompute. A mismatch on a stale pair is the mart waiting for its
-- re-aggregation, not a wrong figure; a pair the recompute never wrote, or that someone else wrote
-- (recomputed NULL), is not.
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
)
SELECT k.cabinet_id, k.day,
       coalesce(w.stale, false) AS stale,
       mart.orders_count, orders.orders_count,
       mart.orders_sum, orders.orders_sum,
       mart.ad_spend, ads.ad_spend,
       mart.payout, payout.payout
FROM keys k
CROSS JOIN LATERAL (
    SELECT coalesce(sum(r.orders_count), 0) AS orders_count, coalesce(sum(r.orders_sum), 0) AS orders_sum,
           coalesce(sum(r.ad_spend), 0) AS ad_spend, coalesce(sum(r.payout), 0) AS payout
    FROM rnp_daily r
    WHERE r.cabinet_id = k.cabinet_id AND r.day = k.day
) mart
CROSS JOIN LATERAL (
    SELECT count(*) AS orders_count, coalesce(sum(o.price_with_disc), 0) AS orders_sum
    FROM wb_orders o
    WHERE o.cabinet_id = k.cabinet_id AND o.day = k.day
) orders
CROSS JOIN LATERAL (
    -- What WB last said of each campaign's day: ad_stats_answers, written from the fullstats answer
    -- itself (migration 0020), so rows the table kept that the latest answer dropped show as a
    -- mismatch; a campaign's day no answer recorded counts as its rows in ad_campaign_stats.
    SELECT coalesce((SELECT sum(s.spend) FROM ad_stats_answers s
                     WHERE s.cabinet_id = k.cabinet_id AND s.day = k.day), 0)
         + coalesce((SELECT sum(a.sum) FROM ad_campaign_stats a
                     WHERE a.cabinet_id = k.cabinet_id AND a.day = k.day
                       AND NOT EXISTS (SELECT FROM ad_stats_answers s
                                       WHERE s.cabinet_id = a.cabinet_id AND s.advert_id = a.advert_id
                                         AND s.day = a.day)), 0) AS ad_spend
) ads
CROSS JOIN LATERAL (
    -- A line lands on the day through its order's day, or, without an order, through its own day.
    SELECT coalesce(sum(CASE WHEN l.doc_type_name = 'Возврат' THEN -1 ELSE 1 END * coalesce(l.for_pay, 0)), 0)
           AS payout
    FROM (
        SELECT l.doc_type_name, l.for_pay
        FROM wb_orders o JOIN wb_report_lines l ON l.cabinet_id = o.cabinet_id AND l.srid = o.srid
        WHERE o.cabinet_id = k.cabinet_id AND o.day = k.day
        UNION ALL
        SELECT l.doc_type_name, l.for_pay
        FROM wb_report_lines l
        WHERE l.cabinet_id = k.cabinet_id AND l.day = k.day
          AND NOT EXISTS (SELECT FROM wb_orders o WHERE o.cabinet_id = l.cabinet_id AND o.srid = l.srid)
    ) l
) payout
LEFT JOIN LATERAL (
    SELECT bool_or(w.recomputed <> w.changes) AS stale
    FROM rnp_watermarks w
    WHERE w.cabinet_id = k.cabinet_id AND w.day = k.day
      AND w.table_name = ANY(%(tables)s)
) w ON true
ORDER BY k.cabinet_id, k.day
