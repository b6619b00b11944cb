"""The partition-manager's plan: which monthly partitions to create and drop."""

from __future__ import annotations

from datetime import date

import pytest

from optima_pipelines.warehouse.table_partitions import (
    PartitionBoundError,
    TablePartition,
    covered_days,
    parse_partition_bound,
    plan_partitions,
)


def month(y: int, m: int) -> TablePartition:
    end = date(y + (m == 12), m % 12 + 1, 1)
    return TablePartition(f"rnp_daily_p{y}{m:02d}", date(y, m, 1), end)


def test_bounds_from_the_catalog():
    assert parse_partition_bound("p", "FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')") == TablePartition(
        "p", date(2026, 1, 1), date(2026, 2, 1)
    )
    assert parse_partition_bound("p", "FOR VALUES FROM (MINVALUE) TO ('2025-01-01')").start is None
    assert parse_partition_bound("p", "DEFAULT").is_default
    with pytest.raises(PartitionBoundError, match="p: bound"):
        parse_partition_bound("p", "FOR VALUES IN ('x')")


def test_plan_creates_three_months_ahead_and_drops_by_retention():
    existing = [month(2025, 12), month(2026, 1), month(2026, 2), month(2026, 3), month(2026, 4)]
    plan = plan_partitions("rnp_daily", existing, date(2026, 4, 15), retention_months=3)
    assert plan.horizon == date(2026, 1, 1)
    assert [name for name, _, _ in plan.create] == ["rnp_daily_p202605", "rnp_daily_p202606", "rnp_daily_p202607"]
    assert plan.create[0][1:] == (date(2026, 5, 1), date(2026, 6, 1))
    assert plan.drop == ("rnp_daily_p202512",)


def test_plan_fills_missing_months_of_the_window_and_leaves_foreign_partitions_alone():
    foreign = TablePartition("rnp_daily_legacy", date(2026, 2, 10), date(2026, 3, 10))
    plan = plan_partitions("rnp_daily", [foreign, month(2026, 4)], date(2026, 4, 15), retention_months=3)
    # January is missing; February and March overlap the foreign partition: not created over it.
    assert [name for name, _, _ in plan.create] == [
        "rnp_daily_p202601",
        "rnp_daily_p202605",
        "rnp_daily_p202606",
        "rnp_daily_p202607",
    ]
    assert plan.drop == ()


def test_a_plan_on_a_managed_table_is_a_no_op_when_applied_twice():
    existing = [month(2026, m) for m in range(1, 8)]
    plan = plan_partitions("rnp_daily", existing, date(2026, 4, 15), retention_months=3)
    assert plan.create == () and plan.drop == ()


def test_covered_days():
    parts = [month(2026, 1), TablePartition("d", None, None, is_default=False)]
    assert covered_days(parts[:1], [date(2025, 12, 31), date(2026, 1, 31), date(2026, 2, 1)]) == [False, True, False]
    assert covered_days([TablePartition("def", None, None, is_default=True)], [date(2000, 1, 1)]) == [True]
