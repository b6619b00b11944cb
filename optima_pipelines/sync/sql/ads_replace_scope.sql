-- A fullstats answer is the whole truth for the campaigns %(adverts)s and the days
-- [%(first)s, %(last)s] it was asked about (docs/data.md, "Snapshots and streams"): the rows of that
-- scope the answer no longer holds (a revised day that lost an app or a product) are removed, after
-- the answer's rows were merged. The k_ arrays are the answer's keys, in the same order. Returns each
-- removed row's day: those days changed.
DELETE FROM ad_campaign_stats a
WHERE a.cabinet_id = %(cabinet_id)s
  AND a.advert_id = ANY(%(adverts)s::bigint[])
  AND a.day BETWEEN %(first)s AND %(last)s
  AND NOT EXISTS (
      SELECT FROM unnest(%(k_advert)s::bigint[], %(k_day)s::date[], %(k_app)s::integer[], %(k_nm)s::bigint[])
          AS k (advert_id, day, app_type, nm_id)
      WHERE k.advert_id = a.advert_id AND k.day = a.day AND k.app_type = a.app_type AND k.nm_id = a.nm_id
  )
RETURNING a.day
