-- New rows of the delta, of days with a table partition.
INSERT INTO {table} (cabinet_id, day, nm_id, {columns})
SELECT d.cabinet_id, d.day, d.nm_id, {delta_values} FROM rnp_delta d WHERE d.old_nm_id IS NULL AND d.covered
