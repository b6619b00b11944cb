INSERT INTO run_workers AS w (id, name, host, pid, runs)
VALUES (%(id)s, %(name)s, %(host)s, %(pid)s, %(runs)s)
ON CONFLICT (id) DO UPDATE SET beat_at = now(), runs = EXCLUDED.runs
