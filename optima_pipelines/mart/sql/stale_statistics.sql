-- Tables never analyzed, or changed by more than half since their last analyze.
SELECT relname FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname = ANY(%(tables)s) AND n_live_tup > 0
  AND (coalesce(last_analyze, last_autoanalyze) IS NULL OR n_mod_since_analyze > n_live_tup / 2)
