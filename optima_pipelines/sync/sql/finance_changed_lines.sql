-- (line day, source-order day) of the report lines this transaction wrote among %(rrd_ids)s.
-- A line's source order is the wb_orders row with its srid; without one, the line's own day
-- (docs/ARCHITECTURE.md: the finance report's affected_days).
SELECT DISTINCT l.day, coalesce(o.day, l.day)
FROM wb_report_lines l
LEFT JOIN wb_orders o ON o.cabinet_id = l.cabinet_id AND o.srid = l.srid
WHERE l.cabinet_id = %(cabinet_id)s
  AND l.rrd_id = ANY(%(rrd_ids)s)
  AND l.loaded_at = now()
