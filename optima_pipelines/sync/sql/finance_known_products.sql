-- Every product id the warehouse knows for a cabinet: its cards, its orders and sales, the lines
-- WB's API reported for it, its campaigns' products.
SELECT nm_id FROM products WHERE cabinet_id = %(cabinet_id)s
UNION
SELECT nm_id FROM wb_orders WHERE cabinet_id = %(cabinet_id)s
UNION
SELECT nm_id FROM wb_sales WHERE cabinet_id = %(cabinet_id)s
UNION
SELECT nm_id FROM wb_report_lines WHERE cabinet_id = %(cabinet_id)s AND source = 'api' AND nm_id <> 0
UNION
SELECT nm_id FROM ad_campaign_products WHERE cabinet_id = %(cabinet_id)s
