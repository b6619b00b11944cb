-- The API's lines %(rrd_ids)s replace their uploaded twins: for each fingerprint among them
-- (report_line_key, migration 0007) that uploaded lines have, the uploaded lines numbered up to the
-- count of API lines with that fingerprint (the CTE `api`, from finance_api_line_counts.sql) are
-- deleted. Returns (line day, source-order day) of each deleted line.
-- Run only for cabinets with uploaded lines. Every step is materialized once: the tables were
-- just written, their statistics are stale, and a re-planned nested loop would redo the work
-- per row.
WITH uploaded AS MATERIALIZED (
    SELECT rrd_id, line_seq,
           report_line_key(srid, seller_oper_name, doc_type_name, nm_id, sale_dt, quantity, delivery_amount,
                           return_amount, retail_amount, for_pay, delivery_service, penalty, paid_storage,
                           paid_acceptance, deduction) AS line_key
    FROM wb_report_lines
    WHERE cabinet_id = %(cabinet_id)s AND source = 'user_report'
),
keys AS MATERIALIZED (
    SELECT report_line_key(srid, seller_oper_name, doc_type_name, nm_id, sale_dt, quantity, delivery_amount,
                           return_amount, retail_amount, for_pay, delivery_service, penalty, paid_storage,
                           paid_acceptance, deduction) AS line_key
    FROM wb_report_lines
    WHERE cabinet_id = %(cabinet_id)s AND rrd_id = ANY(%(rrd_ids)s)
    INTERSECT
    SELECT line_key FROM uploaded
),
{api},
doomed AS MATERIALIZED (
    SELECT u.rrd_id FROM uploaded u JOIN api a USING (line_key) WHERE u.line_seq <= a.n
),
dropped AS (
    DELETE FROM wb_report_lines w
    USING doomed d
    WHERE w.cabinet_id = %(cabinet_id)s AND w.rrd_id = d.rrd_id
    RETURNING w.day, w.srid
)
SELECT d.day, coalesce(o.day, d.day)
FROM dropped d
LEFT JOIN wb_orders o ON o.cabinet_id = %(cabinet_id)s AND o.srid = d.srid
