-- Rows WB sent that a sync refused or flagged (wb_rejected_rows, migration 0017; docs/data.md "Bad
-- values from WB"): one row per cabinet, feed, outcome and raw row. A row seen again (WB sends it on
-- every sync until it corrects it) is counted, with its last run and time. The caller passes each
-- (outcome, raw) once.
INSERT INTO wb_rejected_rows AS r (
    cabinet_id, feed, endpoint, outcome, row_key, field, reason, raw, raw_md5, first_run_id, last_run_id
)
SELECT %(cabinet_id)s, %(feed)s, v.endpoint, v.outcome, v.row_key, v.field, v.reason, v.raw, md5(v.raw),
       %(run_id)s, %(run_id)s
FROM unnest(
    %(endpoints)s::text[], %(outcomes)s::text[], %(keys)s::text[], %(fields)s::text[], %(reasons)s::text[],
    %(raws)s::text[]
) AS v (endpoint, outcome, row_key, field, reason, raw)
ON CONFLICT (cabinet_id, feed, outcome, raw_md5) DO UPDATE
SET endpoint = EXCLUDED.endpoint, row_key = EXCLUDED.row_key, field = EXCLUDED.field, reason = EXCLUDED.reason,
    last_run_id = EXCLUDED.last_run_id, last_seen_at = now(), times_seen = r.times_seen + 1
