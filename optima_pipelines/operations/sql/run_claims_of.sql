-- The claims of a run and of its lineage (the runs retrying the same root), each with its worker's
-- heartbeat: how long ago it beat and whether it still holds the run.
-- (A worker beats with the run before it claims it, and without it after releasing it.)
SELECT c.run_id, c.root_run_id, c.worker_id, c.claimed_at, c.released_at, c.outcome,
       w.name, w.host, w.pid,
       extract(epoch FROM now() - w.beat_at)::float8 AS beat_age,
       coalesce(c.run_id = ANY (w.runs), false) AS held,
       extract(epoch FROM now() - c.claimed_at)::float8 AS claim_age
FROM run_claims c
LEFT JOIN run_workers w ON w.id = c.worker_id
WHERE c.run_id = %(run_id)s OR c.root_run_id = %(root_run_id)s
ORDER BY c.claimed_at
