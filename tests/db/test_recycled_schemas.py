"""The test suite's recycled schemas (tests/conftest.py ``RecycledSchemas``): a test that gets a
recycled warehouse or Dagster storage schema gets what a fresh one is, or the schema is dropped instead."""

from __future__ import annotations

import secrets

from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas
from tests.conftest import RecycledSchemas, drop_schemas, migrate_by_script, replay_dagster_storage

#: Every table's rows, as text, in a stable order: what "the same data" means below.
_ROWS = "SELECT string_agg(t::text, '|' ORDER BY t::text) FROM {}.{} t"


def snapshot(url: str, schema: str) -> dict[str, object]:
    with connect(url, schema, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r' ORDER BY 1", (schema,)
        )]  # fmt: skip
        rows = {
            t: conn.execute(sql.SQL(_ROWS).format(sql.Identifier(schema), sql.Identifier(t))).fetchone()[0]
            for t in tables
        }
        sequences = conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = %s ORDER BY 1", (schema,)
        ).fetchall()
        return {"shape": RecycledSchemas._shape(conn, schema), "rows": rows, "sequences": sequences}


def migrate(url: str, schema: str, script: str):  # type: ignore[no-untyped-def]
    return lambda: migrate_by_script(url, schema, script)


def test_a_recycled_schema_is_what_a_fresh_one_is(database_url, migration_script):
    recycled = RecycledSchemas()
    first, second, fresh = (f"optima_r{secrets.token_hex(4)}" for _ in range(3))
    try:
        # A fresh one: what the others must equal.
        recycled.take(database_url, fresh, migrate(database_url, fresh, migration_script))
        expected = snapshot(database_url, fresh)
        recycled.take(database_url, first, migrate(database_url, first, migration_script))
        with connect(database_url, first, autocommit=True) as conn:
            # A test's rows: in a table with a sequence, in one the migrations wrote, and one deleted again.
            conn.execute("INSERT INTO cabinets (id, name) VALUES ('c1', 'C1')")
            conn.execute("INSERT INTO booking_tasks (cabinet_id, warehouse_ids, date_from, date_to) "
                         "VALUES ('c1', '{1}', '2026-12-01', '2026-12-02')")  # fmt: skip
            conn.execute("UPDATE news_sync_state SET last_error = 'a test wrote here'")
            conn.execute("DELETE FROM booking_tasks")
            # A feed's row: its triggers write the РНП watermarks, and its TRUNCATE would again.
            conn.execute("INSERT INTO wb_orders (cabinet_id, srid, day, date, last_change_date, nm_id) "
                         "VALUES ('c1', 's1', '2026-12-01', '2026-12-01', '2026-12-01', 1)")  # fmt: skip
            # A number drawn from a table's sequence, the table left untouched (as a failed INSERT does).
            conn.execute("SELECT nextval(pg_get_serial_sequence('ops_reaggregations', 'id'))")
        with connect(database_url, autocommit=True) as conn:  # as the fixture gives it back: no search path
            assert recycled.give(conn, first)
        assert snapshot(database_url, first) == expected
        recycled.take(database_url, second, migrate(database_url, second, migration_script))
        assert recycled.free == [] and snapshot(database_url, second) == expected
        with connect(database_url, autocommit=True) as conn:
            assert conn.execute("SELECT to_regnamespace(%s)", (first,)).fetchone()[0] is None, "the old name stayed"
    finally:
        drop_schemas(database_url, first, second, fresh)


def test_a_schema_whose_shape_the_test_changed_is_dropped_not_recycled(database_url, migration_script):
    recycled = RecycledSchemas()
    changes = [
        "ALTER TABLE cabinets ADD COLUMN note text",
        "CREATE TABLE rnp_daily_p203001 PARTITION OF rnp_daily FOR VALUES FROM ('2030-01-01') TO ('2030-02-01')",
        "DROP TRIGGER rnp_daily_rnp_written ON rnp_daily",
    ]
    schemas = [f"optima_r{secrets.token_hex(4)}" for _ in range(len(changes) + 1)]
    try:
        recycled.take(database_url, schemas[0], migrate(database_url, schemas[0], migration_script))
        for schema, change in zip(schemas[1:], changes, strict=True):
            recycled.take(database_url, schema, migrate(database_url, schema, migration_script))
            with connect(database_url, schema, autocommit=True) as conn:
                conn.execute(change)
                assert not recycled.give(conn, schema), change
        assert recycled.free == []
    finally:
        drop_schemas(database_url, *schemas)


def test_a_recycled_dagster_storage_is_what_dagsters_own_statements_made(database_url, dagster_storage_script):
    recycled = RecycledSchemas()
    fresh, first, second = (f"dagster_r{secrets.token_hex(4)}" for _ in range(3))

    def replay(schema: str):  # type: ignore[no-untyped-def]
        def create() -> None:
            ensure_schemas(database_url, schema)
            replay_dagster_storage(database_url, schema, dagster_storage_script)

        return create

    try:
        recycled.take(database_url, fresh, replay(fresh))
        expected = snapshot(database_url, fresh)
        assert any(value is not None for _, value in expected["sequences"]), "Dagster's marks drew no id"
        recycled.take(database_url, first, replay(first))
        with connect(database_url, first, autocommit=True) as conn:
            # A mark more (a seeded table with a sequence), a key-value row, a run.
            conn.execute(
                "INSERT INTO secondary_indexes (name, create_timestamp, migration_completed) VALUES ('x', now(), now())"
            )
            conn.execute("INSERT INTO kvs (key, value) VALUES ('k', 'v')")
            conn.execute(
                "INSERT INTO runs (run_id, pipeline_name, status, run_body) VALUES ('r1', 'j', 'SUCCESS', '{}')"
            )
        with connect(database_url, autocommit=True) as conn:
            assert recycled.give(conn, first)
        assert snapshot(database_url, first) == expected
        ensure_schemas(database_url, second)  # the test's empty one, as optima_env makes it
        recycled.take(database_url, second, replay(second))
        assert recycled.free == [] and snapshot(database_url, second) == expected
    finally:
        drop_schemas(database_url, fresh, first, second)
