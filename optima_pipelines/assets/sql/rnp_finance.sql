-- rnp_finance: the finance domain of the РНП (the realization report, wb_report_lines), one row per
-- cabinet × Moscow day × product (nm_id; lines tied to no product, such as storage or a penalty on
-- the cabinet, are kept under nm_id 0 so that the day's totals stay exact).
--
-- A line belongs to the Moscow day of its source order: the wb_orders row with the line's srid
-- (wb_orders.day), else, when no such order is known, the line's own day (wb_report_lines.day, from
-- rrDate). Money of goods moves with the document: lines with doc_type_name 'Возврат' (a return)
-- subtract, every other line adds, which is how WB itself totals the report (WB gives return lines
-- positive amounts). Charges (logistics, storage, acceptance, penalties, deductions) are taken as
-- WB states them, whatever the document.
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
-- The form of this file: see rnp_sales.sql.
lines AS (
    -- Lines whose source order is known: found through the orders of the requested days.
    SELECT o.cabinet_id, o.day, l.nm_id, l.doc_type_name, l.retail_amount, l.for_pay, l.vw, l.vw_nds,
           l.acquiring_fee, l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty, l.deduction
    FROM wb_orders o
    JOIN wb_report_lines l ON l.cabinet_id = o.cabinet_id AND l.srid = o.srid
    WHERE o.cabinet_id = ANY(%(cabinet_ids)s) AND o.day BETWEEN %(first)s AND %(last)s
    UNION ALL
    -- Lines with no known source order: their own day.
    SELECT l.cabinet_id, l.day, l.nm_id, l.doc_type_name, l.retail_amount, l.for_pay, l.vw, l.vw_nds,
           l.acquiring_fee, l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty, l.deduction
    FROM wb_report_lines l
    WHERE l.cabinet_id = ANY(%(cabinet_ids)s) AND l.day BETWEEN %(first)s AND %(last)s
      AND NOT EXISTS (SELECT 1 FROM wb_orders o WHERE o.cabinet_id = l.cabinet_id AND o.srid = l.srid)
),
signed AS (
    SELECT *, CASE WHEN doc_type_name = 'Возврат' THEN -1 ELSE 1 END AS sign
    FROM lines
),
computed AS (
    SELECT cabinet_id, day, coalesce(nm_id, 0) AS nm_id,
           sum(sign * coalesce(retail_amount, 0)) AS realization,
           sum(sign * coalesce(for_pay, 0)) AS payout,
           sum(sign * (coalesce(vw, 0) + coalesce(vw_nds, 0))) AS commission,
           sum(sign * coalesce(acquiring_fee, 0)) AS acquiring,
           sum(coalesce(delivery_service, 0)) AS logistics,
           sum(coalesce(paid_storage, 0)) AS storage,
           sum(coalesce(paid_acceptance, 0)) AS acceptance,
           sum(coalesce(penalty, 0)) AS penalties,
           sum(coalesce(deduction, 0)) AS other_deductions,
           count(*) AS finance_lines
    FROM signed
    GROUP BY cabinet_id, day, coalesce(nm_id, 0)
)
