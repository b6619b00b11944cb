-- One finished re-aggregation: its history row, and its (domain, cabinet) totals that /metrics reads.
WITH history AS (
    INSERT INTO ops_reaggregations (
        domain, cabinet_id, run_id, trigger, status, partitions_requested, partitions_recomputed,
        source_event_at, started_at, finished_at, error
    )
    VALUES (
        %(domain)s, %(cabinet_id)s, %(run_id)s, %(trigger)s, %(status)s, %(partitions_requested)s,
        %(partitions_recomputed)s, %(source_event_at)s, %(started_at)s, %(finished_at)s, %(error)s
    )
    RETURNING id
)
INSERT INTO ops_reaggregation_totals AS t (
    domain, cabinet_id, runs_success, runs_failure, runs_skipped,
    partitions_requested, partitions_recomputed, lag_seconds_total, lag_count, last_finished_at
)
SELECT
    %(domain)s, %(cabinet_id)s,
    (%(status)s = 'success')::int, (%(status)s = 'failure')::int, (%(status)s = 'skipped')::int,
    %(partitions_requested)s, %(partitions_recomputed)s,
    -- Clocks of different hosts may disagree by a little: a lag is never negative.
    greatest(0, coalesce(extract(epoch FROM %(finished_at)s::timestamptz - %(source_event_at)s::timestamptz), 0)),
    (%(source_event_at)s::timestamptz IS NOT NULL)::int,
    %(finished_at)s
FROM history
ON CONFLICT (domain, cabinet_id) DO UPDATE SET
    runs_success = t.runs_success + EXCLUDED.runs_success,
    runs_failure = t.runs_failure + EXCLUDED.runs_failure,
    runs_skipped = t.runs_skipped + EXCLUDED.runs_skipped,
    partitions_requested = t.partitions_requested + EXCLUDED.partitions_requested,
    partitions_recomputed = t.partitions_recomputed + EXCLUDED.partitions_recomputed,
    lag_seconds_total = t.lag_seconds_total + EXCLUDED.lag_seconds_total,
    lag_count = t.lag_count + EXCLUDED.lag_count,
    last_finished_at = greatest(t.last_finished_at, EXCLUDED.last_finished_at)
