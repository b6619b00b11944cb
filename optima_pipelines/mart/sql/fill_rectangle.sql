-- A first fill whose pairs are every (cabinet, day) of the rectangle the feeds are read by, each
-- with a table partition (a run over consecutive days of its cabinets, as ranged runs are): every
-- computed row is one to write, and the join with the pairs is left out.
WITH {body}
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT c.cabinet_id, c.day, c.nm_id, {computed_values}
FROM computed c
