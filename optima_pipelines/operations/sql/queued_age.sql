-- Age of the oldest run waiting in the queue, per queue.
SELECT coalesce(q.value, 'untagged') AS queue,
       extract(epoch FROM localtimestamp - min(r.create_timestamp)) AS age_seconds
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status = 'QUEUED'
GROUP BY 1
