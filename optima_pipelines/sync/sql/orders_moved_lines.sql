-- Before a page of orders is merged: (the order's day in the page, the day the line is placed on now)
-- of every report line whose placement the page changes. A line belongs to the Moscow day of its
-- source order (srid → wb_orders.day), else to its own day: wb_report_lines.attributed_day
-- (migration 0015). An order that is new, or whose day changes, moves its lines from where they are
-- to the order's day (docs/ARCHITECTURE.md: the orders' finance_days). %(srids)s and %(days)s are
-- the page's orders, in the same order.
SELECT DISTINCT p.day, l.attributed_day
FROM unnest(%(srids)s::text[], %(days)s::date[]) AS p (srid, day)
JOIN wb_report_lines l ON l.cabinet_id = %(cabinet_id)s AND l.srid = p.srid
WHERE l.attributed_day <> p.day
