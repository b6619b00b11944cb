SELECT domain, sum(runs_success), sum(runs_failure), sum(runs_skipped),
       sum(partitions_requested), sum(partitions_recomputed), sum(lag_seconds_total), sum(lag_count)
FROM ops_reaggregation_totals
GROUP BY domain
