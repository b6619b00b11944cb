-- The CTE `api` of the statements that tell uploaded report lines that the API delivered too
-- (finance_drop_uploaded_twins, finance_upload_known; each defines the CTE `keys` before it): for
-- each fingerprint in `keys` (report_line_key, migration 0007), how many of the cabinet's API lines
-- have it. The n-th uploaded line of a fingerprint is an API line's twin when n is at most that count.
api AS MATERIALIZED (
    SELECT k.line_key, count(*) AS n
    FROM keys k
    JOIN wb_report_lines l
      ON l.cabinet_id = %(cabinet_id)s
     AND l.source = 'api'
     AND report_line_key(l.srid, l.seller_oper_name, l.doc_type_name, l.nm_id, l.sale_dt, l.quantity,
                         l.delivery_amount, l.return_amount, l.retail_amount, l.for_pay, l.delivery_service,
                         l.penalty, l.paid_storage, l.paid_acceptance, l.deduction) = k.line_key
    GROUP BY k.line_key
)
