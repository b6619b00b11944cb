-- One finished sync: its history row, and its (feed, cabinet) totals that /metrics reads.
WITH history AS (
    INSERT INTO ops_feed_syncs (
        queue, feed, cabinet_id, run_id, trigger, status,
        rows_fetched, rows_inserted, rows_updated, changed_days, started_at, finished_at, error
    )
    VALUES (
        %(queue)s, %(feed)s, %(cabinet_id)s, %(run_id)s, %(trigger)s, %(status)s,
        %(rows_fetched)s, %(rows_inserted)s, %(rows_updated)s, %(changed_days)s,
        %(started_at)s, %(finished_at)s, %(error)s
    )
    RETURNING id
)
INSERT INTO ops_feed_sync_totals AS t (
    feed, cabinet_id, queue, syncs_success, syncs_failure, syncs_skipped,
    rows_fetched, rows_inserted, rows_updated, changed_days, seconds_total,
    last_status, last_finished_at, last_success_at, confirmed_at, last_error
)
SELECT
    %(feed)s, %(cabinet_id)s, %(queue)s,
    (%(status)s = 'success')::int, (%(status)s = 'failure')::int, (%(status)s = 'skipped')::int,
    %(rows_fetched)s, %(rows_inserted)s, %(rows_updated)s, %(changed_days)s,
    extract(epoch FROM %(finished_at)s::timestamptz - %(started_at)s::timestamptz),
    %(status)s, %(finished_at)s,
    CASE WHEN %(status)s = 'success' THEN %(finished_at)s::timestamptz END,
    CASE WHEN %(confirmed)s THEN %(finished_at)s::timestamptz END,
    %(error)s
FROM history
ON CONFLICT (feed, cabinet_id) DO UPDATE SET
    queue = EXCLUDED.queue,
    syncs_success = t.syncs_success + EXCLUDED.syncs_success,
    syncs_failure = t.syncs_failure + EXCLUDED.syncs_failure,
    syncs_skipped = t.syncs_skipped + EXCLUDED.syncs_skipped,
    rows_fetched = t.rows_fetched + EXCLUDED.rows_fetched,
    rows_inserted = t.rows_inserted + EXCLUDED.rows_inserted,
    rows_updated = t.rows_updated + EXCLUDED.rows_updated,
    changed_days = t.changed_days + EXCLUDED.changed_days,
    seconds_total = t.seconds_total + EXCLUDED.seconds_total,
    -- A late writer (an older run committing after a newer one) must not move "last" backwards.
    last_status = CASE WHEN EXCLUDED.last_finished_at >= t.last_finished_at
                       THEN EXCLUDED.last_status ELSE t.last_status END,
    last_finished_at = greatest(t.last_finished_at, EXCLUDED.last_finished_at),
    last_success_at = greatest(t.last_success_at, EXCLUDED.last_success_at),
    -- Confirmed: the sync went to the end of WB's data (changed or not; not a deferral). greatest()
    -- ignores NULL: a failure or a deferral keeps the last confirmation.
    confirmed_at = greatest(t.confirmed_at, EXCLUDED.confirmed_at),
    last_error = CASE WHEN EXCLUDED.last_finished_at >= t.last_finished_at
                      THEN EXCLUDED.last_error ELSE t.last_error END
