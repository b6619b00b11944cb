-- Lag from the source change to the recompute, over the last hour (ops_reaggregations_finished_idx).
SELECT domain,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY lag),
       max(lag)
FROM (
    SELECT domain, extract(epoch FROM finished_at - source_event_at) AS lag
    FROM ops_reaggregations
    WHERE finished_at > now() - interval '1 hour' AND source_event_at IS NOT NULL
) AS recent
GROUP BY domain
