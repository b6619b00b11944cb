-- Age of the oldest run in a status, per queue, through idx_run_status: {since} is when it entered
-- the status (QUEUED: create_timestamp; STARTING, launched but not yet started, a run worker took it
-- or should have: update_timestamp). Dagster stores naive local timestamps.
SELECT coalesce(q.value, 'untagged') AS queue,
       extract(epoch FROM localtimestamp - min(r.{since})) AS age_seconds
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status = %(status)s
GROUP BY 1
