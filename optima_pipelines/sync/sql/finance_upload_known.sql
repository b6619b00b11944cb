-- Staged upload lines the API already delivered: the n-th uploaded line of a fingerprint is known
-- when the API holds at least n lines with that fingerprint. Returns one row per known line.
WITH keys AS MATERIALIZED (
    SELECT DISTINCT line_key FROM _report_upload
),
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
UPDATE _report_upload s
SET known = true
FROM api a
WHERE s.line_key = a.line_key AND s.line_seq <= a.n
RETURNING s.file_row
