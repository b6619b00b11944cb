-- What the cabinets of sweeps came to in the last 24 hours, per queue (sweep_outcomes_finished_idx).
SELECT queue, outcome, count(*)
FROM sweep_outcomes
WHERE finished_at > now() - interval '24 hours'
GROUP BY 1, 2
