-- rnp_finance: the finance domain of the РНП (the realization report, wb_report_lines), one row per
-- cabinet × Moscow day × product (nm_id; lines tied to no product, such as storage or a penalty on
-- the cabinet, are kept under nm_id 0 so that the day's totals stay exact).
--
-- A line belongs to the Moscow day of its source order: the wb_orders row with the line's srid
-- (wb_orders.day), else, when no such order is known, the line's own day (wb_report_lines.day, from
-- rrDate); wb_report_lines.attributed_day holds that day. Money of goods moves with the document:
-- lines with doc_type_name 'Возврат' (a return) subtract, every other line adds, which is how WB
-- itself totals the report (WB gives return lines positive amounts). Charges (logistics, storage,
-- acceptance, penalties, deductions) are taken as WB states them, whatever the document.
--
--   realization       signed sum of wb_report_lines.retail_amount ("Вайлдберриз реализовал Товар")
--   payout            signed sum of wb_report_lines.for_pay ("К перечислению продавцу за реализованный товар")
--   commission        signed sum of wb_report_lines.vw + vw_nds (WB's reward and its VAT)
--   acquiring         signed sum of wb_report_lines.acquiring_fee
--   logistics         sum of wb_report_lines.delivery_service
--   storage           sum of wb_report_lines.paid_storage
--   acceptance        sum of wb_report_lines.paid_acceptance
--   penalties         sum of wb_report_lines.penalty
--   other_deductions  sum of wb_report_lines.deduction ("Удержания")
--   finance_lines     number of report lines attributed to the row
-- Missing amounts (NULL) count as 0.
--
-- The form of this file, the money sums and the aggregation in key order: see rnp_sales.sql.
lines AS (
    -- The range's lines by their attributed_day (migration 0015: the day of the line's source order,
    -- else its own day, written by the loads and kept right by triggers), by index, with no join;
    -- goods' money negated on a return.
    SELECT l.cabinet_id, l.attributed_day AS day, coalesce(l.nm_id, 0) AS nm_id,
           CASE WHEN l.doc_type_name = 'Возврат' THEN -l.retail_amount ELSE l.retail_amount END AS retail_amount,
           CASE WHEN l.doc_type_name = 'Возврат' THEN -l.for_pay ELSE l.for_pay END AS for_pay,
           CASE WHEN l.doc_type_name = 'Возврат' THEN -(coalesce(l.vw, 0) + coalesce(l.vw_nds, 0))
                ELSE coalesce(l.vw, 0) + coalesce(l.vw_nds, 0) END AS vw,
           CASE WHEN l.doc_type_name = 'Возврат' THEN -l.acquiring_fee ELSE l.acquiring_fee END AS acquiring_fee,
           l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty, l.deduction
    FROM wb_report_lines l
    WHERE l.cabinet_id = ANY(%(cabinet_ids)s) AND l.attributed_day BETWEEN %(first)s AND %(last)s
    ORDER BY 1, 2, 3
    OFFSET 0
),
computed AS (
    SELECT cabinet_id, day, nm_id,
           coalesce(sum(retail_amount), 0) + 0.00 AS realization,
           coalesce(sum(for_pay), 0) + 0.00 AS payout,
           coalesce(sum(vw), 0) + 0.00 AS commission,
           coalesce(sum(acquiring_fee), 0) + 0.00 AS acquiring,
           coalesce(sum(delivery_service), 0) + 0.00 AS logistics,
           coalesce(sum(paid_storage), 0) + 0.00 AS storage,
           coalesce(sum(paid_acceptance), 0) + 0.00 AS acceptance,
           coalesce(sum(penalty), 0) + 0.00 AS penalties,
           coalesce(sum(deduction), 0) + 0.00 AS other_deductions,
           count(*) AS finance_lines
    FROM lines
    GROUP BY cabinet_id, day, nm_id
)
