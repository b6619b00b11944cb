-- The РНП pairs (cabinet, day, table) in [first, last] that are due: their feeds changed after their
-- last recompute, or they were never recomputed (rnp_watermarks.due_since, migration 0021, by its
-- partial index); of %(cabinets)s only, when given. With the watermark's count, which names the
-- state a plan was made from, and since when the pair is due.
SELECT w.cabinet_id, w.day, w.table_name, w.changes, w.due_since
FROM rnp_watermarks w
WHERE w.due_since IS NOT NULL AND w.day BETWEEN %(first)s AND %(last)s
  AND w.table_name = ANY(%(tables)s)
  AND (%(cabinets)s::text[] IS NULL OR w.cabinet_id = ANY(%(cabinets)s::text[]))
ORDER BY 1, 2, 3
