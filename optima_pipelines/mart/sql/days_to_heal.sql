-- (cabinet, day) pairs in [first, last] with orders but no rnp_daily rows: index probes only.
SELECT c.cabinet_id, d.day::date
FROM unnest(%(cabinets)s::text[]) AS c (cabinet_id)
CROSS JOIN generate_series(%(first)s::date, %(last)s::date, interval '1 day') AS d (day)
WHERE EXISTS (SELECT 1 FROM wb_orders o WHERE o.cabinet_id = c.cabinet_id AND o.day = d.day::date)
  AND NOT EXISTS (SELECT 1 FROM rnp_daily r WHERE r.cabinet_id = c.cabinet_id AND r.day = d.day::date)
ORDER BY 1, 2
