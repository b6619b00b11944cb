-- Whether the table holds any row of the pairs (none: a first fill).
SELECT EXISTS (
    SELECT 1 FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS k (cabinet_id, day)
    JOIN {table} t ON t.cabinet_id = k.cabinet_id AND t.day = k.day
    WHERE t.day BETWEEN %(first)s AND %(last)s
)
