"""The checks of the РНП mart, free of Dagster: ``rnp_daily`` compared with the feeds it is computed
from (``sql/rnp_checks.sql``), and the outcome of each check for each (cabinet, day). The asset
checks of assets/rnp.py turn the outcomes into Dagster's evaluations.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg

from optima_pipelines.mart.plan import MART
from optima_pipelines.mart.recompute import TABLES, statement
from optima_pipelines.warehouse.table_partitions import covered_days, list_partitions


@dataclass(frozen=True)
class CheckOutcome:
    check_name: str
    cabinet_id: str
    day: date
    passed: bool
    #: The feeds changed after the pair's last recompute: a mismatch is the mart behind, not wrong.
    stale: bool
    description: str
    metadata: dict[str, Any]


#: check name → (metrics compared, the source named in messages)
CHECK_METRICS: dict[str, tuple[tuple[str, ...], str]] = {
    "orders_match_wb_orders": (("orders_count", "orders_sum"), "wb_orders"),
    "ad_spend_matches_ad_campaign_stats": (("ad_spend",), "ad_campaign_stats"),
    "payout_matches_finance_lines": (("payout",), "wb_report_lines"),
}
_METRIC_COLUMNS = ("orders_count", "orders_sum", "ad_spend", "payout")
#: The feeds the checks compare the mart with: while a cabinet's first load of one is not done, its
#: pairs are stale (operations.freshness.catching_up).
CHECK_SOURCES = ("wb_orders", "ad_campaign_stats", "wb_report_lines")


def compare_with_feeds(conn: psycopg.Connection, pairs: Sequence[tuple[str, date]]) -> list[tuple]:
    """Per pair: cabinet, day, stale (rnp_checks.sql), then (rnp_daily, feed) for orders_count,
    orders_sum, ad_spend, payout."""
    ordered = sorted(set(pairs))
    with conn.transaction():
        # Index probes per pair; compiling them (the plan of 1,000 cabinets × 2 days costs above
        # jit_above_cost) took 2.4 s of a 3.5-s statement.
        conn.execute("SET LOCAL jit = off")
        return conn.execute(
            statement("rnp_checks"),
            {"cabinets": [c for c, _ in ordered], "days": [d for _, d in ordered], "tables": list(TABLES)},
        ).fetchall()


def compare_covered_with_feeds(
    conn: psycopg.Connection, pairs: Sequence[tuple[str, date]]
) -> tuple[list[tuple[str, date]], list[tuple]]:
    """The pairs that have an rnp_daily table partition, and their comparison (compare_with_feeds).
    The others' rows were dropped by design: comparing them with the feeds would only ever fail."""
    covered = covered_days(list_partitions(conn, MART), [d for _, d in pairs])
    checked = [p for p, ok in zip(pairs, covered, strict=True) if ok]
    return checked, compare_with_feeds(conn, checked)


def evaluate_checks(
    rows: Sequence[tuple], check_names: Sequence[str], filling: Collection[str] = frozenset()
) -> list[CheckOutcome]:
    """The outcome of each check for each compared row (as returned by compare_with_feeds). The
    pairs of ``filling`` cabinets (still on a feed's first load: ``operations.freshness.catching_up``)
    are stale too: a mismatch there is a warning, never an error."""
    outcomes = []
    for row in rows:
        cabinet_id, day, behind = row[0], row[1], bool(row[2])
        stale = behind or cabinet_id in filling
        pairs = dict(zip(_METRIC_COLUMNS, zip(row[3::2], row[4::2], strict=True), strict=True))
        for name in check_names:
            metrics, source = CHECK_METRICS[name]
            mismatches = [m for m in metrics if Decimal(pairs[m][0]) != Decimal(pairs[m][1])]
            metadata: dict[str, Any] = {"cabinet": cabinet_id, "day": day.isoformat(), "stale": stale}
            for m in metrics:
                metadata[f"{m}_rnp_daily"] = str(pairs[m][0])
                metadata[f"{m}_{source}"] = str(pairs[m][1])
            if mismatches:
                description = (
                    "; ".join(f"{m}: rnp_daily has {pairs[m][0]}, {source} has {pairs[m][1]}" for m in mismatches)
                    + f" (cabinet {cabinet_id}, day {day.isoformat()})"
                )
                if behind:
                    description += "; the feeds changed after its last recompute: a re-aggregation is due"
                elif stale:
                    description += "; the cabinet's feeds are still on their first load: the mart is catching up"
            else:
                description = ", ".join(f"{m} {pairs[m][0]}" for m in metrics) + f" match {source}"
            outcomes.append(CheckOutcome(name, cabinet_id, day, not mismatches, stale, description, metadata))
    return outcomes
