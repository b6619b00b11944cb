-- (cabinet, day) of the source orders of the report lines of [first, last] (their own day) that
-- belong to another day: where those lines are placed (their attributed_day, migration 0015).
SELECT DISTINCT l.cabinet_id, l.attributed_day
FROM wb_report_lines l
WHERE l.cabinet_id = ANY(%(cabinets)s) AND l.day BETWEEN %(first)s AND %(last)s AND l.attributed_day <> l.day
ORDER BY 1, 2
