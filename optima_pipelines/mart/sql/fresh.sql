-- The pairs of a table whose feeds did not change since their last recompute (their rows locked by watermarks.sql).
SELECT w.cabinet_id, w.day
FROM rnp_watermarks w JOIN unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
  ON w.cabinet_id = k.cabinet_id AND w.day = k.day
WHERE w.table_name = %(table)s AND w.recomputed = w.changes
