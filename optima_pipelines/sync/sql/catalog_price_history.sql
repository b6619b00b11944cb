-- A price_history row, valid from valid_from (when WB answered these prices; in a replay, when
-- it answered the landed ones), for each of the cabinet's products %(nm_ids)s whose
-- (price, discount, club discount) in prices differs from its latest history row (or that has
-- none). Returns one row per row added.
INSERT INTO price_history (cabinet_id, nm_id, valid_from, price, discount, club_discount)
SELECT p.cabinet_id, p.nm_id, %(valid_from)s, p.price, p.discount, p.club_discount
FROM prices p
LEFT JOIN LATERAL (
    SELECT h.price, h.discount, h.club_discount FROM price_history h
    WHERE h.cabinet_id = p.cabinet_id AND h.nm_id = p.nm_id
    ORDER BY h.valid_from DESC LIMIT 1
) last ON true
WHERE p.cabinet_id = %(cabinet_id)s AND p.nm_id = ANY(%(nm_ids)s)
  AND (last.price, last.discount, last.club_discount)
      IS DISTINCT FROM (p.price, p.discount, p.club_discount)
ON CONFLICT DO NOTHING
RETURNING nm_id
