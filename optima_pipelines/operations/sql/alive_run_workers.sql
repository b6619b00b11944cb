SELECT id, name, host, pid, started_at, beat_at, runs
FROM run_workers
WHERE beat_at > now() - make_interval(secs => %(within)s)
ORDER BY name, pid
