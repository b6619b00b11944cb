-- (cabinet, day, table) of the РНП pairs in [first, last] whose watermark says stale: the feeds
-- changed after the pair's last recompute (rnp_watermarks, migration 0012). The checks call such a
-- pair stale (rnp_checks.sql): the nightly merge recomputes them whatever their age, and the sensor
-- adds them to its next plan. A NULL recomputed (never recomputed, or the table written by someone
-- else) is not stale: days_to_heal.sql finds the days that lost their rows.
SELECT w.cabinet_id, w.day, w.table_name
FROM rnp_watermarks w
WHERE w.cabinet_id = ANY(%(cabinets)s) AND w.day BETWEEN %(first)s AND %(last)s
  AND w.table_name = ANY(%(tables)s) AND w.recomputed <> w.changes
ORDER BY 1, 2, 3
