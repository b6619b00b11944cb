-- Runs by queue and status: every run still in the queue or running (few, through idx_run_status),
-- and those that finished in the last 24 hours (through idx_run_range on status, update_timestamp).
-- Dagster stores naive timestamps in the server's time zone: compare with localtimestamp.
SELECT coalesce(q.value, 'untagged') AS queue, r.status, count(*)
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status IN ('NOT_STARTED', 'QUEUED', 'STARTING', 'STARTED', 'CANCELING')
GROUP BY 1, 2
UNION ALL
SELECT coalesce(q.value, 'untagged') AS queue, r.status, count(*)
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status IN ('SUCCESS', 'FAILURE', 'CANCELED')
  AND r.update_timestamp > localtimestamp - interval '24 hours'
GROUP BY 1, 2
