-- Runs that ended skipped (e.g. account-busy) in the last 24 hours, through idx_run_tags (key, value).
SELECT coalesce(q.value, 'untagged') AS queue, s.value AS reason, count(*)
FROM {run_tags} AS s
JOIN {runs} AS r ON r.run_id = s.run_id
LEFT JOIN {run_tags} AS q ON q.run_id = s.run_id AND q.key = %(queue_tag)s
WHERE s.key = %(skipped_tag)s
  AND r.update_timestamp > localtimestamp - interval '24 hours'
GROUP BY 1, 2
