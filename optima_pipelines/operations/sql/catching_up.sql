-- The cabinets among %(cabinets)s still catching up: a feed of %(feeds)s whose first load has not
-- finished (no confirmed sync yet: ops_feed_sync_totals.confirmed_at, one row per feed and cabinet).
SELECT c.id
FROM unnest(%(cabinets)s::text[]) AS c (id)
WHERE EXISTS (
    SELECT
    FROM unnest(%(feeds)s::text[]) AS f (feed)
    LEFT JOIN ops_feed_sync_totals AS t ON t.feed = f.feed AND t.cabinet_id = c.id
    WHERE t.confirmed_at IS NULL
)
