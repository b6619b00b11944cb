-- A first fill (the table holds no row of the pairs): the computed rows go straight into the table,
-- without the full join against nothing and the temporary copy of every row a delta would be.
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body}
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT c.cabinet_id, c.day, c.nm_id, {computed_values}
FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day
WHERE k.covered
