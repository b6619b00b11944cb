-- The watermarks of the pairs (db/migrations/versions/0012_rnp_watermarks.py), created if
-- missing and locked, in the order the feeds' triggers lock them: a feed write that is not
-- committed yet holds its pairs' rows, so the recompute waits for it and then sees its rows; one
-- that comes later bumps changes after the recompute's commit, and the pair is stale again.
INSERT INTO rnp_watermarks AS w (cabinet_id, table_name, day)
SELECT DISTINCT k.cabinet_id, k.table_name, k.day
FROM unnest(%(cabinets)s::text[], %(tables)s::text[], %(days)s::date[]) AS k (cabinet_id, table_name, day)
ORDER BY 1, 2, 3
ON CONFLICT (cabinet_id, table_name, day) DO UPDATE SET changes = w.changes
