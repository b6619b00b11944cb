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
-- The form of this file, money in kopecks and the aggregation in key order: see rnp_sales.sql.
lines AS (
    -- The range's lines by their attributed_day (migration 0015: the day of the line's source order,
    -- else its own day, written by the loads and kept right by triggers), by index, with no join.
    SELECT l.cabinet_id, l.attributed_day AS day, l.nm_id, l.doc_type_name, l.retail_amount, l.for_pay,
           l.vw, l.vw_nds, l.acquiring_fee, l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty,
           l.deduction
    FROM wb_report_lines l
    WHERE l.cabinet_id = ANY(%(cabinet_ids)s) AND l.attributed_day BETWEEN %(first)s AND %(last)s
),
signed AS (
    SELECT cabinet_id, day, coalesce(nm_id, 0) AS nm_id,
           CASE WHEN doc_type_name = 'Возврат' THEN -1 ELSE 1 END AS sign,
           retail_amount, rnp_kopecks(retail_amount) AS retail_amount_k,
           for_pay, rnp_kopecks(for_pay) AS for_pay_k,
           coalesce(vw, 0) + coalesce(vw_nds, 0) AS vw, rnp_kopecks(coalesce(vw, 0) + coalesce(vw_nds, 0)) AS vw_k,
           acquiring_fee, rnp_kopecks(acquiring_fee) AS acquiring_fee_k,
           delivery_service, rnp_kopecks(delivery_service) AS delivery_service_k,
           paid_storage, rnp_kopecks(paid_storage) AS paid_storage_k,
           paid_acceptance, rnp_kopecks(paid_acceptance) AS paid_acceptance_k,
           penalty, rnp_kopecks(penalty) AS penalty_k,
           deduction, rnp_kopecks(deduction) AS deduction_k
    FROM lines
    ORDER BY cabinet_id, day, nm_id
    OFFSET 0
),
sums AS (
    SELECT cabinet_id, day, nm_id,
           rnp_sum(sign * retail_amount_k) AS realization_k,
           rnp_numsum(sign * retail_amount) FILTER (WHERE retail_amount_k IS NULL) AS realization_rest,
           rnp_sum(sign * for_pay_k) AS payout_k,
           rnp_numsum(sign * for_pay) FILTER (WHERE for_pay_k IS NULL) AS payout_rest,
           rnp_sum(sign * vw_k) AS commission_k,
           rnp_numsum(sign * vw) FILTER (WHERE vw_k IS NULL) AS commission_rest,
           rnp_sum(sign * acquiring_fee_k) AS acquiring_k,
           rnp_numsum(sign * acquiring_fee) FILTER (WHERE acquiring_fee_k IS NULL) AS acquiring_rest,
           rnp_sum(delivery_service_k) AS logistics_k,
           rnp_numsum(delivery_service) FILTER (WHERE delivery_service_k IS NULL) AS logistics_rest,
           rnp_sum(paid_storage_k) AS storage_k,
           rnp_numsum(paid_storage) FILTER (WHERE paid_storage_k IS NULL) AS storage_rest,
           rnp_sum(paid_acceptance_k) AS acceptance_k,
           rnp_numsum(paid_acceptance) FILTER (WHERE paid_acceptance_k IS NULL) AS acceptance_rest,
           rnp_sum(penalty_k) AS penalties_k,
           rnp_numsum(penalty) FILTER (WHERE penalty_k IS NULL) AS penalties_rest,
           rnp_sum(deduction_k) AS other_deductions_k,
           rnp_numsum(deduction) FILTER (WHERE deduction_k IS NULL) AS other_deductions_rest,
           count(*) AS finance_lines
    FROM signed
    GROUP BY cabinet_id, day, nm_id
),
computed AS (
    SELECT cabinet_id, day, nm_id,
           rnp_money(realization_k, realization_rest) AS realization,
           rnp_money(payout_k, payout_rest) AS payout,
           rnp_money(commission_k, commission_rest) AS commission,
           rnp_money(acquiring_k, acquiring_rest) AS acquiring,
           rnp_money(logistics_k, logistics_rest) AS logistics,
           rnp_money(storage_k, storage_rest) AS storage,
           rnp_money(acceptance_k, acceptance_rest) AS acceptance,
           rnp_money(penalties_k, penalties_rest) AS penalties,
           rnp_money(other_deductions_k, other_deductions_rest) AS other_deductions,
           finance_lines
    FROM sums
)
