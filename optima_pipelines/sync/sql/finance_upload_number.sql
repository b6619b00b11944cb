-- Staged upload (_report_upload): each line's fingerprint, and its number among identical lines
-- of the file (in file order).
UPDATE _report_upload s
SET line_key = k.line_key, line_seq = k.seq
FROM (
    SELECT file_row, line_key, row_number() OVER (PARTITION BY line_key ORDER BY file_row) AS seq
    FROM (
        SELECT file_row,
               report_line_key(srid, seller_oper_name, doc_type_name, nm_id, sale_dt, quantity, delivery_amount,
                               return_amount, retail_amount, for_pay, delivery_service, penalty, paid_storage,
                               paid_acceptance, deduction) AS line_key
        FROM _report_upload
    ) keyed
) k
WHERE s.file_row = k.file_row
