-- Rows WB sent that syncs refused or flagged (wb_rejected_rows), seen in the last 24 hours, per feed
-- and outcome (wb_rejected_rows_seen_idx): one row per distinct bad row, however often WB repeated it.
SELECT feed, outcome, count(*)
FROM wb_rejected_rows
WHERE last_seen_at > now() - interval '24 hours'
GROUP BY 1, 2
