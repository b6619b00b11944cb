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
-- Parameters: as in rnp_sales.sql.
WITH keys AS (
    SELECT *
    FROM unnest(%(cabinets)s::text[], %(days)s::date[], %(covered)s::boolean[]) AS k (cabinet_id, day, covered)
),
lines AS (
    -- Lines whose source order is known: found through the orders of the requested days.
    SELECT k.cabinet_id, k.day, l.nm_id, l.doc_type_name, l.retail_amount, l.for_pay, l.vw, l.vw_nds,
           l.acquiring_fee, l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty, l.deduction
    FROM keys k
    JOIN wb_orders o ON o.cabinet_id = k.cabinet_id AND o.day = k.day
    JOIN wb_report_lines l ON l.cabinet_id = o.cabinet_id AND l.srid = o.srid
    UNION ALL
    -- Lines with no known source order: their own day.
    SELECT k.cabinet_id, k.day, l.nm_id, l.doc_type_name, l.retail_amount, l.for_pay, l.vw, l.vw_nds,
           l.acquiring_fee, l.delivery_service, l.paid_storage, l.paid_acceptance, l.penalty, l.deduction
    FROM keys k
    JOIN wb_report_lines l ON l.cabinet_id = k.cabinet_id AND l.day = k.day
    WHERE NOT EXISTS (SELECT 1 FROM wb_orders o WHERE o.cabinet_id = l.cabinet_id AND o.srid = l.srid)
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
),
written AS (
    -- Rows whose values changed (or are new); the others are left alone (no new row version).
    INSERT INTO rnp_finance AS t (
        cabinet_id, day, nm_id, realization, payout, commission, acquiring, logistics, storage, acceptance,
        penalties, other_deductions, finance_lines
    )
    SELECT
        c.cabinet_id, c.day, c.nm_id, c.realization, c.payout, c.commission, c.acquiring, c.logistics,
        c.storage, c.acceptance, c.penalties, c.other_deductions, c.finance_lines
    FROM computed c JOIN keys k USING (cabinet_id, day)
    WHERE k.covered
    ON CONFLICT (cabinet_id, day, nm_id) DO UPDATE SET
        realization = EXCLUDED.realization, payout = EXCLUDED.payout, commission = EXCLUDED.commission,
        acquiring = EXCLUDED.acquiring, logistics = EXCLUDED.logistics, storage = EXCLUDED.storage,
        acceptance = EXCLUDED.acceptance, penalties = EXCLUDED.penalties,
        other_deductions = EXCLUDED.other_deductions, finance_lines = EXCLUDED.finance_lines, updated_at = now()
    WHERE (
        t.realization, t.payout, t.commission, t.acquiring, t.logistics, t.storage, t.acceptance, t.penalties,
        t.other_deductions, t.finance_lines
    ) IS DISTINCT FROM (
        EXCLUDED.realization, EXCLUDED.payout, EXCLUDED.commission, EXCLUDED.acquiring, EXCLUDED.logistics,
        EXCLUDED.storage, EXCLUDED.acceptance, EXCLUDED.penalties, EXCLUDED.other_deductions,
        EXCLUDED.finance_lines
    )
    RETURNING 1
),
removed AS (
    -- Rows of the requested partitions that no longer exist upstream.
    DELETE FROM rnp_finance AS t
    USING keys k
    WHERE t.cabinet_id = k.cabinet_id AND t.day = k.day
      AND NOT EXISTS (SELECT 1 FROM computed c WHERE (c.cabinet_id, c.day, c.nm_id) = (t.cabinet_id, t.day, t.nm_id))
    RETURNING 1
)
SELECT (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE k.covered) AS rows_kept,
       (SELECT count(*) FROM written) AS rows_changed,
       (SELECT count(*) FROM removed) AS rows_removed,
       (SELECT count(*) FROM computed c JOIN keys k USING (cabinet_id, day) WHERE NOT k.covered) AS rows_dropped
