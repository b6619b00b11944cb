-- (line day, source-order day) of the report lines this transaction wrote among %(rrd_ids)s.
-- A line's source order is the wb_orders row with its srid; without one, the line's own day:
-- wb_report_lines.attributed_day, migration 0015 (docs/ARCHITECTURE.md: the finance report's
-- affected_days).
SELECT DISTINCT l.day, l.attributed_day
FROM wb_report_lines l
WHERE l.cabinet_id = %(cabinet_id)s
  AND l.rrd_id = ANY(%(rrd_ids)s)
  AND l.loaded_at = now()
