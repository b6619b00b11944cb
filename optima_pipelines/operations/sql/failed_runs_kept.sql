-- Failed runs kept in Dagster's storage, per queue: the dead-letter (prune_runs deletes only
-- successful runs). Through idx_run_status; a person deleting them makes the figure fall.
SELECT coalesce(q.value, 'untagged') AS queue, count(*)
FROM {runs} AS r
LEFT JOIN {run_tags} AS q ON q.run_id = r.run_id AND q.key = %(queue_tag)s
WHERE r.status = 'FAILURE'
GROUP BY 1
