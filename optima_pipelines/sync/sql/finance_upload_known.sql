-- Staged upload lines the API already delivered: the n-th uploaded line of a fingerprint is known
-- when the API holds at least n lines with that fingerprint (the CTE `api`, from
-- finance_api_line_counts.sql). Returns one row per known line.
WITH keys AS MATERIALIZED (
    SELECT DISTINCT line_key FROM _report_upload
),
{api}
UPDATE _report_upload s
SET known = true
FROM api a
WHERE s.line_key = a.line_key AND s.line_seq <= a.n
RETURNING s.file_row
