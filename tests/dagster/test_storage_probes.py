"""Dagster's storage asks PostgreSQL whether its tables exist before every tick it writes; the
deployment's storage remembers a yes (orchestration/dagster_internals.SCHEMA_PROBES): at 1,000
cabinets those probes were PostgreSQL's largest CPU cost."""

from __future__ import annotations

import time

import sqlalchemy as sa
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import TickData, TickStatus


def _table_listings(statements: list[str]) -> int:
    return sum("pg_catalog.pg_class" in s for s in statements)


def test_sensor_ticks_ask_for_dagsters_tables_once_and_a_missing_table_every_time(dagster_instance) -> None:
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        for _ in range(10):
            tick = dagster_instance.create_tick(
                TickData(
                    instigator_origin_id="origin",
                    instigator_name="a_sensor",
                    instigator_type=InstigatorType.SENSOR,
                    status=TickStatus.STARTED,
                    timestamp=time.time(),
                    selector_id="selector",
                )
            )
            dagster_instance.update_tick(tick.with_status(TickStatus.SKIPPED))
            dagster_instance.purge_ticks(
                "origin", "selector", before=time.time() - 86400, tick_statuses=[TickStatus.SKIPPED]
            )
        ticks_probes = _table_listings(statements)
        statements.clear()
        storage = dagster_instance.event_log_storage
        assert not storage.has_table("no_such_table") and not storage.has_table("no_such_table")
        missing_probes = _table_listings(statements)
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
    # Dagster itself asks 3 times a tick (create, update, purge): 30 here.
    assert ticks_probes <= 1
    assert len(dagster_instance.get_ticks("origin", "selector", limit=20)) == 10
    assert missing_probes == 2
