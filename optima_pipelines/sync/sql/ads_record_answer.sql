-- What the answer said for every (campaign, day) of its scope (migration 0020, ad_stats_answers):
-- %(adverts)s × %(days)s, the answer's figures summed per pair in the same order (0 rows: the
-- answer left the campaign's day out).
INSERT INTO ad_stats_answers AS a (cabinet_id, advert_id, day, rows, spend, orders, orders_sum, answered_at, run_id)
SELECT %(cabinet_id)s, k.advert_id, k.day, k.rows, k.spend, k.orders, k.orders_sum, now(), %(run_id)s
FROM unnest(%(adverts)s::bigint[], %(days)s::date[], %(rows)s::integer[], %(spend)s::numeric[], %(orders)s::bigint[],
            %(orders_sum)s::numeric[]) AS k (advert_id, day, rows, spend, orders, orders_sum)
ON CONFLICT (cabinet_id, advert_id, day) DO UPDATE
SET rows = EXCLUDED.rows, spend = EXCLUDED.spend, orders = EXCLUDED.orders, orders_sum = EXCLUDED.orders_sum,
    answered_at = EXCLUDED.answered_at, run_id = EXCLUDED.run_id
