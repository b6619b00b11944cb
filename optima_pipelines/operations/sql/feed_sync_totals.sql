-- Feed sync figures per (queue, feed): one row per (feed, cabinet) in the totals table, a few thousand.
SELECT t.queue, t.feed,
       sum(t.syncs_success), sum(t.syncs_failure), sum(t.syncs_skipped),
       sum(t.rows_fetched), sum(t.rows_inserted), sum(t.rows_updated), sum(t.changed_days),
       sum(t.seconds_total),
       extract(epoch FROM now() - max(t.last_success_at)),
       extract(epoch FROM now() - min(t.last_success_at) FILTER (WHERE c.status = 'active')),
       count(*) FILTER (WHERE t.last_status = 'failure' AND c.status = 'active')
FROM ops_feed_sync_totals AS t
LEFT JOIN cabinets AS c ON c.id = t.cabinet_id
GROUP BY t.queue, t.feed
