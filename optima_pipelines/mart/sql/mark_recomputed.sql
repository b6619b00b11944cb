-- The pairs recomputed (and covered by a table partition) are up to date with the feeds.
UPDATE rnp_watermarks w SET recomputed = w.changes
FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
WHERE w.cabinet_id = k.cabinet_id AND w.table_name = %(table)s AND w.day = k.day
