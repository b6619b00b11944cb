-- One transaction-level advisory lock per (cabinet, day) pair, taken in key order (see _lock_pairs).
-- The day as a number: a date's text depends on the session's DateStyle.
SELECT count(pg_advisory_xact_lock(%(namespace)s, k))
FROM (SELECT DISTINCT hashtext(c || '|' || (d - date '2000-01-01')) AS k
      FROM unnest(%(cabinets)s::text[], %(days)s::date[]) AS p (c, d) ORDER BY k) AS s
