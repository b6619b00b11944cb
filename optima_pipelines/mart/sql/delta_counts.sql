-- The delta's rows to update, to insert, to delete, and those of days without a table partition.
SELECT count(*) FILTER (WHERE nm_id IS NOT NULL AND old_nm_id IS NOT NULL),
       count(*) FILTER (WHERE old_nm_id IS NULL AND covered),
       count(*) FILTER (WHERE nm_id IS NULL),
       count(*) FILTER (WHERE NOT covered)
FROM rnp_delta
