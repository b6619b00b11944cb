-- Age of the oldest run launched but not yet started (STARTING: a run worker took it, or should
-- have), per queue; through idx_run_status. Dagster stores naive local timestamps.
SELECT coalesce(q.value, 'untagged') AS queue,
       extract(epoch FROM localtimestamp - min(r.update_timestamp)) AS age_seconds
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status = 'STARTING'
GROUP BY 1
