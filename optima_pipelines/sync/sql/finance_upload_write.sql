-- The staged upload's new lines into wb_report_lines, under a synthetic negative rrd_id derived
-- from (fingerprint, number), so that uploading the same report again finds its own lines and
-- changes nothing. Only lines whose values differ are rewritten. {columns}, {set_clause}, {old}
-- and {new} are filled in by sync/finance.py (identifiers only), and {attributed_day}, the day the
-- line is placed on (sync/finance.PLACED: its order's day, else its own; migration 0015).
INSERT INTO wb_report_lines AS t ({columns}, rrd_id, line_seq, source, request_id, run_id, attributed_day)
SELECT {columns},
       -(('x' || substr(md5(line_key || ':' || line_seq), 1, 15))::bit(60)::bigint),
       line_seq, 'user_report', %(request_id)s, %(run_id)s, {attributed_day}
FROM _report_upload AS s
WHERE NOT known
ON CONFLICT (cabinet_id, rrd_id) DO UPDATE
SET {set_clause}, attributed_day = EXCLUDED.attributed_day, request_id = EXCLUDED.request_id,
    run_id = EXCLUDED.run_id, loaded_at = now()
WHERE ({old}) IS DISTINCT FROM ({new})
RETURNING (xmax = 0) AS inserted, rrd_id, day
