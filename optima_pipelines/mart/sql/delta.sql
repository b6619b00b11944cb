-- What a recompute changes: computed (the table's .sql file), kept to the run's (cabinet, day)
-- pairs, set against the rows the pairs hold now in one full join (a hash or merge join whatever
-- the planner's estimates). One row per row to insert (old_nm_id NULL), to update (both keys
-- set, values differ) or to delete (nm_id NULL); covered is false for rows of days without
-- a table partition, which are only counted. first/last bound the days so that the planner
-- reads only the table partitions of the run.
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body},
scoped AS (
    SELECT c.*, k.covered FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day
),
existing AS (
    SELECT t.*
    FROM keys k JOIN {table} t ON t.cabinet_id = k.cabinet_id AND t.day = k.day
    WHERE t.day BETWEEN %(first)s AND %(last)s
)
SELECT c.*, e.cabinet_id AS old_cabinet_id, e.day AS old_day, e.nm_id AS old_nm_id
FROM scoped c
FULL JOIN existing e ON e.cabinet_id = c.cabinet_id AND e.day = c.day AND e.nm_id = c.nm_id
WHERE c.nm_id IS NULL OR e.nm_id IS NULL OR ({computed_values}) IS DISTINCT FROM ({existing_values})
