-- Rows nothing upstream produces any more.
DELETE FROM {table} t
USING rnp_delta d
WHERE d.nm_id IS NULL AND t.day BETWEEN %(first)s AND %(last)s
  AND t.cabinet_id = d.old_cabinet_id AND t.day = d.old_day AND t.nm_id = d.old_nm_id
