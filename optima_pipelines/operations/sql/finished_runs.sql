-- Runs that finished since the watermark (with some overlap; the caller drops those it has seen).
SELECT r.run_id, coalesce(q.value, 'untagged') AS queue, r.status, r.start_time, r.end_time,
       r.update_timestamp
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status IN ('SUCCESS', 'FAILURE', 'CANCELED')
  AND r.update_timestamp > %(since)s
ORDER BY r.update_timestamp
LIMIT %(limit)s
