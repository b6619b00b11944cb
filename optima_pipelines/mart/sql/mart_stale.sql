-- A rollup's changed rows make rnp_daily of their pairs stale (the merge reads the rollups).
UPDATE rnp_watermarks w SET changes = w.changes + 1
FROM (SELECT DISTINCT coalesce(cabinet_id, old_cabinet_id) AS cabinet_id, coalesce(day, old_day) AS day
      FROM rnp_delta) d
WHERE w.cabinet_id = d.cabinet_id AND w.table_name = 'rnp_daily' AND w.day = d.day
