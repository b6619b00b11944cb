-- The rows computed for pairs of days without a table partition: dropped, only counted.
WITH keys AS (
    SELECT * FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
{body}
SELECT count(*) FROM computed c JOIN keys k ON k.cabinet_id = c.cabinet_id AND k.day = c.day WHERE NOT k.covered
