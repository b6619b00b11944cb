-- The writes, each run only when the delta has rows for it, from the delta in a temporary table:
-- the planner sees its real size (a handful of rows after a late cancellation, every row at a
-- first fill), and a first fill is a plain INSERT (no conflict check: the cabinet's advisory lock
-- keeps other writers out).
UPDATE {table} t SET ({columns}, updated_at) = ({delta_values}, now())
FROM rnp_delta d
WHERE d.nm_id IS NOT NULL AND d.old_nm_id IS NOT NULL AND t.day BETWEEN %(first)s AND %(last)s
  AND t.cabinet_id = d.cabinet_id AND t.day = d.day AND t.nm_id = d.nm_id
