-- The table's columns, in order (value_columns keeps all but the key and updated_at).
SELECT attname FROM pg_attribute
WHERE attrelid = to_regclass(%(table)s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum
