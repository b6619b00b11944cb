"""The tests' migration script (Alembic's offline SQL) builds exactly the schema `upgrade` builds."""

from __future__ import annotations

import secrets

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import current_revision, head_revision, upgrade
from tests.conftest import TEST_RETENTION_MONTHS, drop_schemas, migrate_by_script

#: Every object of a schema, as text without the schema's name: columns, constraints, indexes,
#: partitions, functions, triggers, views.
CATALOG = """
SELECT 'column', c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' = ' || pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(s)s AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s
UNION ALL
SELECT 'index', pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s
UNION ALL
SELECT 'partition', c.relname || ' ' || coalesce(pg_get_expr(c.relpartbound, c.oid), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s AND c.relispartition
UNION ALL
SELECT 'function', p.proname || ' ' || md5(p.prosrc)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s
UNION ALL
SELECT 'trigger', t.tgname || ' ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND NOT t.tgisinternal
UNION ALL
SELECT 'view', c.relname || ' ' || pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s AND c.relkind IN ('v', 'm')
"""


def catalog(url: str, schema: str) -> list[str]:
    with connect(url, autocommit=True) as conn:
        rows = conn.execute(CATALOG, {"s": schema}).fetchall()
    return sorted(f"{kind}: {text.replace(schema, '<schema>')}" for kind, text in rows)


def test_the_migration_script_builds_what_upgrade_builds(database_url, migration_script, monkeypatch):
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", TEST_RETENTION_MONTHS)  # as the script was written
    online, scripted = (f"optima_m{secrets.token_hex(4)}" for _ in range(2))
    try:
        upgrade(database_url, online)
        migrate_by_script(database_url, scripted, migration_script)
        built = catalog(database_url, online)
        assert len(built) > 300  # the whole warehouse: feeds, the РНП, engines, ops
        assert catalog(database_url, scripted) == built
        assert current_revision(database_url, scripted) == current_revision(database_url, online) == head_revision()
    finally:
        drop_schemas(database_url, online, scripted)
