"""The partition-manager job on the real tables: 3 months ahead, retention, and rows outside partitions."""

from __future__ import annotations

import pytest

from optima_pipelines.errors import ConfigError
from optima_pipelines.settings import load_settings
from optima_pipelines.warehouse.table_partitions import MANAGED_TABLES, add_months, list_partitions, partition_name
from tests.rnp_feeds import TODAY, add_cabinets, add_order, rnp_job, run_range

THIS_MONTH = TODAY.replace(day=1)


def months(conn, table: str) -> list[str]:
    return [p.name for p in list_partitions(conn, table)]


def manage(instance) -> dict[str, list[str]]:
    """Run the job; what it reports it created and dropped."""
    result = rnp_job("partition_manager").execute_in_process(instance=instance)
    assert result.success
    [output] = [
        e.step_output_data
        for e in result.all_node_events
        if e.is_successful_output and e.step_key == "manage_table_partitions"
    ]
    return {k: output.metadata[k].value for k in ("created", "dropped")}  # type: ignore[misc]


def test_creates_three_months_ahead_and_drops_by_retention(dagster_instance, warehouse_conn, monkeypatch):
    # A deployment that kept 24 months of history (the default) now keeps 3, and has lost the future
    # months of rnp_daily. (The test schema is migrated with 3 months: the older 21 are made here.)
    for table in MANAGED_TABLES:
        for back in range(4, 25):
            month = add_months(THIS_MONTH, -back)
            warehouse_conn.execute(
                f"CREATE TABLE {partition_name(table, month)} PARTITION OF {table} "
                f"FOR VALUES FROM ('{month}') TO ('{add_months(month, 1)}')"
            )
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", "3")
    for ahead in (1, 2, 3):
        warehouse_conn.execute(f"DROP TABLE {partition_name('rnp_daily', add_months(THIS_MONTH, ahead))}")
    done = manage(dagster_instance)
    wanted = [add_months(THIS_MONTH, n) for n in range(-3, 4)]
    for table in MANAGED_TABLES:
        assert months(warehouse_conn, table) == [partition_name(table, m) for m in wanted]
    assert done["created"] == [partition_name("rnp_daily", add_months(THIS_MONTH, n)) for n in (1, 2, 3)]
    assert len(done["dropped"]) == 21 * len(MANAGED_TABLES)
    assert partition_name("rnp_sales", add_months(THIS_MONTH, -4)) in done["dropped"]
    # Applied again, the plan is empty.
    assert manage(dagster_instance) == {"created": [], "dropped": []}


def test_a_recompute_of_days_past_retention_drops_and_counts_their_rows(dagster_instance, warehouse_conn, monkeypatch):
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", "3")
    manage(dagster_instance)
    old_day = add_months(THIS_MONTH, -5)
    add_cabinets(dagster_instance, "c1")
    add_order(warehouse_conn, "c1", "old", old_day, 1, "10.00")
    add_order(warehouse_conn, "c1", "new", TODAY, 1, "20.00")
    result = run_range(dagster_instance, f"c1|{old_day}", f"c1|{old_day}", assets=["rnp_sales", "rnp_daily"])
    [mat] = [m for m in result.asset_materializations_for_node("rnp") if m.asset_key.to_user_string() == "rnp_sales"]
    assert mat.metadata["batch_rows_dropped_outside_table_partitions"].value == 1
    assert mat.metadata["batch_days_outside_table_partitions"].value == [old_day.isoformat()]
    count = warehouse_conn.execute("SELECT count(*) FROM rnp_daily WHERE cabinet_id = 'c1'").fetchone()
    assert count == (0,)


def test_retention_below_the_healing_window_is_refused(monkeypatch):
    monkeypatch.setenv("OPTIMA_PARTITION_RETENTION_MONTHS", "2")
    with pytest.raises(ConfigError, match="OPTIMA_PARTITION_RETENTION_MONTHS must be at least 3"):
        load_settings()


def test_the_landing_keeps_its_retention(dagster_instance, warehouse_conn, settings, monkeypatch):
    """The same weekly job deletes the landed days of WB's answers past OPTIMA_LANDING_RETENTION_DAYS."""
    from datetime import timedelta
    from pathlib import Path

    from optima_pipelines.timeutil import today_moscow

    monkeypatch.setenv("OPTIMA_LANDING_RETENTION_DAYS", "10")
    root = Path(settings.landing_url)
    old, kept = today_moscow() - timedelta(days=11), today_moscow() - timedelta(days=10)
    for day in (old, kept):
        folder = root / "feed=orders" / f"day={day.isoformat()}"
        folder.mkdir(parents=True)
        (folder / "part-x.parquet").write_bytes(b"landed")
    assert rnp_job("partition_manager").execute_in_process(instance=dagster_instance).success
    assert sorted(p.name for p in (root / "feed=orders").iterdir()) == [f"day={kept.isoformat()}"]
