"""Hand-made WB feed rows and feed events for the РНП tests: what the feed assets (issues 4, 5) write.

Rows go straight into the feed tables of migration 0003 (their contract); events are reported the
way the feed assets report them (docs/ARCHITECTURE.md: partition ``cabinet|day``, metadata
``trigger`` and, for the finance report, ``affected_days``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    DagsterInstance,
    ExecuteInProcessResult,
    JobDefinition,
    MetadataValue,
    RunRequest,
)

from optima_pipelines.partitions import CABINETS_NAME, cabinet_day_key
from optima_pipelines.timeutil import MOSCOW, today_moscow

TODAY = today_moscow()


def days_ago(n: int) -> date:
    return TODAY - timedelta(days=n)


def moscow_noon(day: date) -> datetime:
    return datetime.combine(day, time(12, 0), tzinfo=MOSCOW)


def add_order(
    conn: psycopg.Connection,
    cabinet: str,
    srid: str,
    day: date,
    nm_id: int,
    price: str,
    *,
    is_cancel: bool = False,
    spp: str | None = None,
) -> None:
    conn.execute(
        """
        INSERT INTO wb_orders (cabinet_id, srid, day, date, last_change_date, nm_id, total_price,
                               price_with_disc, finished_price, spp, is_cancel, cancel_date)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (cabinet_id, srid) DO UPDATE SET is_cancel = EXCLUDED.is_cancel,
            cancel_date = EXCLUDED.cancel_date, last_change_date = EXCLUDED.last_change_date
        """,
        (
            cabinet,
            srid,
            day,
            moscow_noon(day),
            datetime.now(MOSCOW),
            nm_id,
            Decimal(price) * 2,
            Decimal(price),
            Decimal(price),
            Decimal(spp) if spp is not None else None,
            is_cancel,
            datetime.now(MOSCOW) if is_cancel else None,
        ),
    )


def add_sale(
    conn: psycopg.Connection, cabinet: str, sale_id: str, srid: str, day: date, nm_id: int, price: str
) -> None:
    conn.execute(
        """
        INSERT INTO wb_sales (cabinet_id, sale_id, srid, day, date, last_change_date, is_return, nm_id,
                              price_with_disc, for_pay, finished_price)
        VALUES (%s, %s, %s, %s, %s, now(), %s, %s, %s, %s, %s)
        """,
        (
            cabinet,
            sale_id,
            srid,
            day,
            moscow_noon(day),
            sale_id.startswith("R"),
            nm_id,
            Decimal(price),
            Decimal(price) * Decimal("0.8"),
            Decimal(price),
        ),
    )


def add_report_line(
    conn: psycopg.Connection,
    cabinet: str,
    rrd_id: int,
    day: date,
    nm_id: int | None,
    *,
    srid: str | None = None,
    doc_type_name: str = "Продажа",
    **amounts: str,
) -> None:
    """A realization report line; ``amounts`` are numeric columns (for_pay, retail_amount, vw, ...)."""
    columns = ["cabinet_id", "rrd_id", "day", "rr_date", "nm_id", "srid", "doc_type_name", *amounts]
    values: list[Any] = [cabinet, rrd_id, day, day, nm_id, srid, doc_type_name]
    values += [Decimal(v) for v in amounts.values()]
    conn.execute(
        f"INSERT INTO wb_report_lines ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(values))})",
        values,
    )


def add_ad_stat(
    conn: psycopg.Connection,
    cabinet: str,
    advert_id: int,
    day: date,
    nm_id: int,
    *,
    app_type: int = 1,
    views: int = 0,
    clicks: int = 0,
    spend: str = "0",
    atbs: int = 0,
    orders: int = 0,
    sum_price: str = "0",
    is_associated: bool = False,
) -> None:
    conn.execute(
        """
        INSERT INTO ad_campaign_stats (cabinet_id, advert_id, day, app_type, nm_id, is_associated, views,
                                       clicks, atbs, orders, sum, sum_price)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """,
        (
            cabinet,
            advert_id,
            day,
            app_type,
            nm_id,
            is_associated,
            views,
            clicks,
            atbs,
            orders,
            Decimal(spend),
            Decimal(sum_price),
        ),
    )


def add_funnel(
    conn: psycopg.Connection, cabinet: str, day: date, nm_id: int, *, opens: int, carts: int, **extra: str
) -> None:
    columns = ["cabinet_id", "day", "nm_id", "open_count", "cart_count", *extra]
    values: list[Any] = [cabinet, day, nm_id, opens, carts, *(Decimal(v) for v in extra.values())]
    conn.execute(
        f"INSERT INTO rnp_funnel_stats ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(values))})",
        values,
    )


def add_stock(
    conn: psycopg.Connection, cabinet: str, day: date, nm_id: int, chrt_id: int, warehouse_id: int, quantity: int
) -> None:
    conn.execute(
        """
        INSERT INTO stocks (cabinet_id, day, nm_id, chrt_id, warehouse_id, quantity, in_way_to_client,
                            in_way_from_client, snapshot_at)
        VALUES (%s, %s, %s, %s, %s, %s, 1, 2, now())
        """,
        (cabinet, day, nm_id, chrt_id, warehouse_id, quantity),
    )


def add_cabinets(instance: DagsterInstance, *cabinets: str) -> None:
    """What the cabinet sensor does for cabinets of the cabinets table."""
    instance.add_dynamic_partitions(CABINETS_NAME, list(cabinets))


def report_feed_event(
    instance: DagsterInstance,
    feed: str,
    cabinet: str,
    day: date,
    *,
    trigger: str = "scheduled",
    affected_days: Sequence[date] | None = None,
    **metadata: Any,
) -> None:
    """A feed partition's materialization, as an increment or import run logs it."""
    meta: dict[str, Any] = {"trigger": trigger, **metadata}
    if affected_days is not None:
        meta["affected_days"] = MetadataValue.json([d.isoformat() for d in affected_days])
    instance.report_runless_asset_event(
        AssetMaterialization(asset_key=AssetKey(feed), partition=cabinet_day_key(cabinet, day), metadata=meta)
    )


def due_days(conn: psycopg.Connection, cabinet: str, table: str) -> set[date]:
    """The days of ``table`` the watermarks say are due for the cabinet (what the planner will recompute)."""
    rows = conn.execute(
        "SELECT day FROM rnp_watermarks WHERE cabinet_id = %s AND table_name = %s AND due_since IS NOT NULL",
        (cabinet, table),
    ).fetchall()
    return {day for (day,) in rows}


def rnp_rows(conn: psycopg.Connection, table: str, cabinet: str, day: date) -> dict[int, dict[str, Any]]:
    """``table``'s rows of a cabinet and day, by nm_id, as column → value."""
    cur = conn.execute(
        f"SELECT * FROM {table} WHERE cabinet_id = %s AND day = %s ORDER BY nm_id",
        (cabinet, day),
    )
    names = [d.name for d in cur.description or []]
    return {row[2]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def rnp_job(name: str = "rnp_recompute") -> JobDefinition:
    from optima_pipelines.definitions import defs

    return defs.resolve_job_def(name)


def execute_request(
    instance: DagsterInstance, request: RunRequest, job: str = "rnp_recompute"
) -> ExecuteInProcessResult:
    """Run what a sensor or schedule asked for, in process, as the daemon would launch it."""
    result = rnp_job(job).execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        asset_selection=request.asset_selection,
        tags=request.tags,
    )
    assert result.success
    return result


def run_range(
    instance: DagsterInstance, first: str, last: str, *, assets: Sequence[str] | None = None, job: str = "rnp_recompute"
) -> ExecuteInProcessResult:
    """Run the job over the partition rectangle ``first``..``last`` (keys ``cabinet|day``)."""
    request = RunRequest(
        asset_selection=[AssetKey(a) for a in assets] if assets is not None else None,
        tags={"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last},
    )
    return execute_request(instance, request, job)


def materialized_partitions(instance: DagsterInstance, asset: str, after_storage_id: int | None = None) -> list[str]:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), after_storage_id=after_storage_id), limit=10_000
    ).records
    return sorted(str(r.asset_materialization.partition) for r in records if r.asset_materialization)


def last_storage_id(instance: DagsterInstance) -> int:
    records = instance.fetch_materializations(AssetKey("rnp_daily"), limit=1).records
    return records[0].storage_id if records else 0
