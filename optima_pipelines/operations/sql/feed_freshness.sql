-- Freshness of the watched feeds of every watched cabinet (active, or whose token WB rejected): per
-- feed, how many cabinets, how many stale, the oldest lag, and the %(top)s stalest with what holds
-- them. A cabinet's lag runs from its feed's last confirmed sync (ops_feed_sync_totals.confirmed_at,
-- one row per (feed, cabinet)), or from the cabinet's creation before its first one. One row per
-- feed at least (its rank 1), at most %(top)s; a few thousand index lookups at 1,000 cabinets.
WITH feeds AS (
    SELECT *
    FROM unnest(%(feeds)s::text[], %(state_feeds)s::text[], %(queues)s::text[], %(allowances)s::float8[])
        AS f (feed, state_feed, queue, allowance_s)
), judged AS (
    SELECT f.feed, f.state_feed, f.queue, f.allowance_s, c.id AS cabinet_id, c.status,
           c.token_rejected_at, c.token_rejected_reason,
           t.confirmed_at, t.last_status, t.last_finished_at, t.last_error,
           extract(epoch FROM now() - coalesce(t.confirmed_at, c.created_at))::float8 AS age_s,
           c.status = 'token_invalid'
               OR extract(epoch FROM now() - coalesce(t.confirmed_at, c.created_at)) > f.allowance_s AS stale
    FROM feeds AS f
    CROSS JOIN cabinets AS c
    LEFT JOIN ops_feed_sync_totals AS t ON t.feed = f.feed AND t.cabinet_id = c.id
    WHERE c.status IN ('active', 'token_invalid')
), ranked AS (
    SELECT j.*,
           count(*) OVER by_feed AS watched,
           count(*) FILTER (WHERE j.stale) OVER by_feed AS stale_count,
           max(j.age_s) OVER by_feed AS oldest_s,
           row_number() OVER (PARTITION BY j.feed ORDER BY j.stale DESC, j.age_s DESC, j.cabinet_id) AS rank
    FROM judged AS j
    WINDOW by_feed AS (PARTITION BY j.feed)
)
SELECT r.feed, r.watched, r.stale_count, r.oldest_s, r.stale, r.cabinet_id, r.age_s, r.status,
       r.token_rejected_at, r.token_rejected_reason, r.confirmed_at, r.last_status, r.last_finished_at,
       r.last_error, s.resume_at, s.last_error AS pause_reason, o.outcome, o.reason, o.finished_at
FROM ranked AS r
LEFT JOIN sync_state AS s ON r.stale AND s.cabinet_id = r.cabinet_id AND s.feed = r.state_feed
LEFT JOIN LATERAL (
    -- The cabinet's last sweep outcome in the feed's queue since its last confirmation
    -- (sweep_outcomes_cabinet_idx): account-busy, deferred, retrying...
    SELECT so.outcome, so.reason, so.finished_at
    FROM sweep_outcomes AS so
    WHERE r.stale AND so.cabinet_id = r.cabinet_id AND so.queue = r.queue
      AND so.finished_at > coalesce(r.confirmed_at, '-infinity')
    ORDER BY so.finished_at DESC
    LIMIT 1
) AS o ON true
WHERE r.rank = 1 OR (r.stale AND r.rank <= %(top)s)
ORDER BY r.feed, r.rank
