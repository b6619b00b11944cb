-- After a first fill of a rollup: rnp_daily of its pairs is stale.
UPDATE rnp_watermarks w SET changes = w.changes + 1
FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
WHERE w.cabinet_id = k.cabinet_id AND w.table_name = 'rnp_daily' AND w.day = k.day
