"""Benchmark: recompute the РНП of one cabinet, 90 days × 5,000 products, in SQL and in pandas.

    python bench/rnp_recompute.py [--quick] [--days 90] [--products 5000] [--repeat 3]

Generates the cabinet's feeds in a scratch database (dropped at the end), then times what one
re-aggregation run over the 90-day range does: the three rollups and the merge, set-based SQL in
PostgreSQL (optima_pipelines.mart.recompute.recompute_tables over the four tables, as the rnp asset
runs it: transactions of at most PARTITIONS_PER_TRANSACTION days, each over the four tables,
RECOMPUTE_CONNECTIONS of them at once; statistics refreshed first as after any bulk load: the feeds are
fresh, as after a first import), first into empty tables, then again with nothing changed. Then one
order of a day 20 days back is cancelled, as an increment would bring it, and the re-aggregation of
that one (cabinet, day) is timed. The baseline, in the same round on the same data: the same rollup
in pandas (read the feeds with COPY, compute, write the mart back with COPY), money as integer
kopecks so that it is exact too, for the range and for the changed day. The mart pandas writes is
compared with the one SQL wrote cell by cell (every mismatch printed, and the benchmark fails)
before any figure is printed. Rounds repeat on emptied tables (the machine may be shared: each
round prints its load average); the fastest of each is reported.
"""

from __future__ import annotations

import io
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from optima_pipelines.mart.recompute import (
    PARTITIONS_PER_TRANSACTION,
    RECOMPUTE_CONNECTIONS,
    TABLES,
    recompute_tables,
    value_columns,
)
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.timeutil import today_moscow

CABINET = "bench"
SCHEMA = "optima_bench"

# Deterministic pseudo-random feeds, generated inside PostgreSQL. h(a, b) is a cheap integer hash.
GENERATE = """
CREATE FUNCTION pg_temp.h(a bigint, b bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
AS $$ SELECT abs((a * 2654435761 + b * 40503) %% 1000003) $$;

INSERT INTO wb_orders (cabinet_id, srid, day, date, last_change_date, nm_id, total_price, price_with_disc,
                       finished_price, spp, is_cancel)
SELECT %(cabinet)s, 'o' || n || '.' || p || '.' || k, %(first)s::date + n,
       (%(first)s::date + n + time '12:00') AT TIME ZONE 'Europe/Moscow', now(), p,
       2 * (500 + p %% 97 * 10 + k * 0.37), 500 + p %% 97 * 10 + k * 0.37, 400 + p %% 97 * 10,
       pg_temp.h(p, n) %% 30, pg_temp.h(p + k, n) %% 10 = 0
FROM generate_series(0, %(days)s - 1) AS n, generate_series(1, %(products)s) AS p,
     LATERAL generate_series(1, (pg_temp.h(p, n) %% 4)::int) AS k;

INSERT INTO wb_sales (cabinet_id, sale_id, srid, day, date, last_change_date, is_return, nm_id, price_with_disc,
                      for_pay, finished_price)
SELECT cabinet_id, CASE WHEN pg_temp.h(nm_id, length(srid)) %% 20 = 1 THEN 'R' ELSE 'S' END || srid, srid,
       least(day + 2, %(last)s::date), date + interval '2 days', now(),
       pg_temp.h(nm_id, length(srid)) %% 20 = 1, nm_id, price_with_disc, price_with_disc * 0.8, finished_price
FROM wb_orders
WHERE cabinet_id = %(cabinet)s AND NOT is_cancel AND pg_temp.h(nm_id, length(srid)) %% 3 <> 0;

INSERT INTO ad_campaign_stats (cabinet_id, advert_id, day, app_type, nm_id, is_associated, views, clicks, atbs,
                               orders, sum, sum_price)
SELECT %(cabinet)s, 1000 + p %% 50, %(first)s::date + n, app, p, p %% 15 = 0, 100 + pg_temp.h(p, n) %% 900,
       pg_temp.h(p, n + app) %% 40, pg_temp.h(p, n) %% 5, pg_temp.h(p, n) %% 3,
       round((pg_temp.h(p, n + app) %% 40) * 7.35 + 0.11, 2), (pg_temp.h(p, n) %% 3) * 612.5
FROM generate_series(0, %(days)s - 1) AS n, generate_series(1, %(products)s) AS p, unnest(ARRAY[1, 32, 64]) AS app
WHERE p %% 5 = 0;

INSERT INTO wb_report_lines (cabinet_id, rrd_id, day, rr_date, nm_id, srid, doc_type_name, retail_amount, for_pay,
                             vw, vw_nds, acquiring_fee, delivery_service)
SELECT cabinet_id, 2 * row_number() OVER (), least(day + 7, %(last)s::date), least(day + 7, %(last)s::date), nm_id,
       srid, CASE WHEN is_return THEN 'Возврат' ELSE 'Продажа' END, price_with_disc, round(price_with_disc * 0.8, 2),
       round(price_with_disc * 0.12, 2), round(price_with_disc * 0.024, 2), round(price_with_disc * 0.015, 2), 0
FROM wb_sales WHERE cabinet_id = %(cabinet)s;
INSERT INTO wb_report_lines (cabinet_id, rrd_id, day, rr_date, nm_id, srid, doc_type_name, delivery_service)
SELECT cabinet_id, rrd_id + 1, day, day, nm_id, srid, '', 50 + nm_id %% 30
FROM wb_report_lines WHERE cabinet_id = %(cabinet)s;
INSERT INTO wb_report_lines (cabinet_id, rrd_id, day, rr_date, nm_id, paid_storage, penalty)
SELECT %(cabinet)s, 100000000 + n, %(first)s::date + n, %(first)s::date + n, 0, 1234.56 + n, n %% 7 * 100
FROM generate_series(0, %(days)s - 1) AS n;

INSERT INTO rnp_funnel_stats (cabinet_id, day, nm_id, open_count, cart_count, order_count, add_to_cart_conversion,
                              cart_to_order_conversion, buyout_percent)
SELECT %(cabinet)s, %(first)s::date + n, p, pg_temp.h(p, n) %% 500, pg_temp.h(p, n) %% 50, pg_temp.h(p, n) %% 4,
       pg_temp.h(p, n) %% 20, pg_temp.h(p, n + 1) %% 60, pg_temp.h(p, n + 2) %% 100
FROM generate_series(0, %(days)s - 1) AS n, generate_series(1, %(products)s) AS p;

INSERT INTO stocks (cabinet_id, day, nm_id, chrt_id, warehouse_id, quantity, in_way_to_client, in_way_from_client,
                    snapshot_at)
SELECT %(cabinet)s, %(first)s::date + n, p, p * 10, 507, pg_temp.h(p, n) %% 200, pg_temp.h(p, n) %% 5,
       pg_temp.h(p, n) %% 3, now()
FROM generate_series(0, %(days)s - 1) AS n, generate_series(1, %(products)s) AS p;
"""

FEEDS = ("wb_orders", "wb_sales", "ad_campaign_stats", "wb_report_lines", "rnp_funnel_stats", "stocks")


def read_frame(conn: psycopg.Connection, query: str, params: dict) -> pd.DataFrame:
    """A query's rows through COPY (the fast way into pandas)."""
    buffer = io.BytesIO()
    statement = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv, HEADER)").format(
        sql.SQL(query).format(**{k: sql.Literal(v) for k, v in params.items()})
    )
    with conn.cursor() as cur, cur.copy(statement) as copy:
        for chunk in copy:
            buffer.write(chunk)
    buffer.seek(0)
    return pd.read_csv(buffer, true_values=["t"], false_values=["f"], low_memory=False)


def recompute_all(
    warehouse: Warehouse, pairs: list[tuple[str, date]], label: str, *, force: bool = False
) -> tuple[float, int]:
    """Seconds, and rows written (inserted, updated or deleted) over the four tables: one
    recompute_tables over the four, as a run of the rnp asset does (its transactions at once)."""
    harness.say(f"    {label}:")
    t = time.perf_counter()
    done = recompute_tables(warehouse.connect, dict.fromkeys(TABLES, pairs), force=force)
    total = time.perf_counter() - t
    written = 0
    for table, stats in done.items():
        written += stats.rows_changed + stats.rows_removed
        harness.say(
            f"      {table:<12} {stats.seconds:6.2f} s  {stats.partitions - stats.unchanged:>3} of {stats.partitions} "
            f"(cabinet, day)s recomputed ({stats.unchanged} unchanged by their watermark), {stats.rows:>9,} rows, "
            f"{stats.rows_changed + stats.rows_removed:>9,} written"
        )
    harness.say(
        f"      total        {total:6.2f} s, {written:,} rows written (the tables' seconds are summed over "
        f"{RECOMPUTE_CONNECTIONS} connections at once)"
    )
    return total, written


def pandas_rollup(
    conn: psycopg.Connection, first: date, last: date
) -> tuple[pd.DataFrame, dict[str, float], dict[str, pd.DataFrame]]:
    """The same rollups and merge as mart/sql/rnp_*.sql, in pandas: the mart, the time each step
    took, and the three rollups (computed on the way, for the cell-by-cell check). Money in integer
    kopecks."""
    timings: dict[str, float] = {}
    t = time.perf_counter()
    p = {"c": CABINET, "f": first, "l": last}
    orders = read_frame(
        conn,
        "SELECT day, nm_id, srid, (price_with_disc * 100)::bigint AS price, spp, is_cancel FROM wb_orders "
        "WHERE cabinet_id = {c} AND day BETWEEN {f} AND {l}",
        p,
    )
    sales = read_frame(
        conn,
        "SELECT day, nm_id, is_return, (abs(price_with_disc) * 100)::bigint AS price FROM wb_sales "
        "WHERE cabinet_id = {c} AND day BETWEEN {f} AND {l}",
        p,
    )
    ads = read_frame(
        conn,
        "SELECT day, nm_id, views, clicks, atbs, orders, (sum * 100)::bigint AS spend, "
        "(sum_price * 100)::bigint AS sum_price FROM ad_campaign_stats WHERE cabinet_id = {c} AND day BETWEEN {f} AND {l}",
        p,
    )
    lines = read_frame(
        conn,
        "SELECT day, nm_id, srid, doc_type_name, (coalesce(retail_amount, 0) * 100)::bigint AS retail, "
        "(coalesce(for_pay, 0) * 100)::bigint AS for_pay, ((coalesce(vw, 0) + coalesce(vw_nds, 0)) * 100)::bigint AS vw, "
        "(coalesce(acquiring_fee, 0) * 100)::bigint AS acq, (coalesce(delivery_service, 0) * 100)::bigint AS logistics, "
        "(coalesce(paid_storage, 0) * 100)::bigint AS storage, (coalesce(paid_acceptance, 0) * 100)::bigint AS acceptance, "
        "(coalesce(penalty, 0) * 100)::bigint AS penalty, (coalesce(deduction, 0) * 100)::bigint AS deduction "
        "FROM wb_report_lines WHERE cabinet_id = {c}",
        p,
    )
    all_orders = read_frame(conn, "SELECT srid, day AS order_day FROM wb_orders WHERE cabinet_id = {c}", p)
    funnel = read_frame(
        conn,
        "SELECT day, nm_id, open_count, cart_count, add_to_cart_conversion, cart_to_order_conversion, buyout_percent "
        "FROM rnp_funnel_stats WHERE cabinet_id = {c} AND day BETWEEN {f} AND {l}",
        p,
    )
    stock = read_frame(
        conn,
        "SELECT day, nm_id, quantity, in_way_to_client, in_way_from_client FROM stocks "
        "WHERE cabinet_id = {c} AND day BETWEEN {f} AND {l}",
        p,
    )
    timings["read"] = time.perf_counter() - t

    t = time.perf_counter()
    key = ["day", "nm_id"]
    orders["cancel_price"] = orders["price"].where(orders["is_cancel"], 0)
    o = orders.groupby(key).agg(
        orders_count=("price", "size"),
        orders_sum=("price", "sum"),
        cancellations_count=("is_cancel", "sum"),
        cancellations_sum=("cancel_price", "sum"),
        avg_spp_percent=("spp", "mean"),
    )
    sales["buy"] = ~sales["is_return"]
    sales["buy_price"] = sales["price"].where(sales["buy"], 0)
    sales["ret_price"] = sales["price"].where(sales["is_return"], 0)
    s = sales.groupby(key).agg(
        buyouts_count=("buy", "sum"),
        buyouts_sum=("buy_price", "sum"),
        returns_count=("is_return", "sum"),
        returns_sum=("ret_price", "sum"),
    )
    a = ads.groupby(key).agg(
        ad_views=("views", "sum"),
        ad_clicks=("clicks", "sum"),
        ad_spend=("spend", "sum"),
        ad_carts=("atbs", "sum"),
        ad_orders=("orders", "sum"),
        ad_orders_sum=("sum_price", "sum"),
    )
    attributed = lines.merge(all_orders, on="srid", how="left")
    attributed["day"] = attributed["order_day"].fillna(attributed["day"])
    attributed = attributed[(attributed["day"] >= str(first)) & (attributed["day"] <= str(last))]
    sign = np.where(attributed["doc_type_name"] == "Возврат", -1, 1)
    for column in ("retail", "for_pay", "vw", "acq"):
        attributed[column] = attributed[column] * sign
    attributed["nm_id"] = attributed["nm_id"].fillna(0).astype("int64")
    f = attributed.groupby(key).agg(
        finance_lines=("retail", "size"),
        realization=("retail", "sum"),
        payout=("for_pay", "sum"),
        commission=("vw", "sum"),
        acquiring=("acq", "sum"),
        logistics=("logistics", "sum"),
        storage=("storage", "sum"),
        acceptance=("acceptance", "sum"),
        penalties=("penalty", "sum"),
        other_deductions=("deduction", "sum"),
    )
    st = stock.groupby(key).agg(
        stock_qty=("quantity", "sum"),
        stock_in_way_to_client=("in_way_to_client", "sum"),
        stock_in_way_from_client=("in_way_from_client", "sum"),
    )
    mart = o.join([s, a, f.drop(columns="finance_lines"), funnel.set_index(key), st], how="outer")
    additive = [*o.columns.drop("avg_spp_percent"), *s.columns, *a.columns, *f.columns.drop("finance_lines")]
    mart[additive] = mart[additive].fillna(0).astype("int64")
    snapshots = ["open_count", "cart_count", *st.columns]  # unknown stays unknown (NULL)
    mart[snapshots] = mart[snapshots].astype("Int64")
    mart["avg_order_price"] = (mart["orders_sum"] / mart["orders_count"].replace(0, np.nan) / 100).round(2)
    mart["avg_spp_percent"] = mart["avg_spp_percent"].round(2)
    mart["ad_ctr_percent"] = (100 * mart["ad_clicks"] / mart["ad_views"].replace(0, np.nan)).round(2)
    mart["ad_cpc"] = (mart["ad_spend"] / mart["ad_clicks"].replace(0, np.nan) / 100).round(2)
    mart["ad_cpm"] = (10 * mart["ad_spend"] / mart["ad_views"].replace(0, np.nan)).round(2)
    drr = 100 * mart["ad_spend"]  # no ads with orders: 0 %; no orders: no ДРР (NULL)
    mart["drr_of_orders_sum_percent"] = (drr / mart["orders_sum"].replace(0, np.nan)).round(2)
    mart["drr_of_ad_orders_sum_percent"] = (drr / mart["ad_orders_sum"].replace(0, np.nan)).round(2)
    mart = mart.reset_index()
    timings["compute"] = time.perf_counter() - t
    by_key = mart.set_index(key)
    sales = by_key.loc[o.join(s, how="outer").index, SALES_COLUMNS].reset_index()
    ads_rows = a.join(by_key[ADS_COLUMNS[6:]]).reset_index()
    return mart, timings, {"rnp_sales": sales, "rnp_ads": ads_rows, "rnp_finance": f.reset_index()}


def write_frame(conn: psycopg.Connection, mart: pd.DataFrame, first: date, last: date) -> float:
    """Replace the cabinet's rnp_daily rows of the range with the pandas mart (DELETE + COPY, one
    transaction), as a pandas job would write it."""
    t = time.perf_counter()
    with conn.transaction():
        conn.execute("DELETE FROM rnp_daily WHERE cabinet_id = %s AND day BETWEEN %s AND %s", (CABINET, first, last))
        out = mart.assign(cabinet_id=CABINET, **{m: mart[m] / 100 for m in MONEY})
        out = out.rename(
            columns={
                "open_count": "card_opens",
                "cart_count": "add_to_cart",
                "add_to_cart_conversion": "add_to_cart_conversion_percent",
                "cart_to_order_conversion": "cart_to_order_conversion_percent",
                "buyout_percent": "funnel_buyout_percent",
            }
        )
        columns = list(out.columns)
        buffer = out[columns].to_csv(index=False, header=False)
        with conn.cursor() as cur:
            statement = sql.SQL("COPY rnp_daily ({}) FROM STDIN WITH (FORMAT csv)").format(
                sql.SQL(", ").join(map(sql.Identifier, columns))
            )
            with cur.copy(statement) as copy:
                copy.write(buffer)
    return time.perf_counter() - t


#: The rollups' columns, as the pandas mart has them (rnp_sales, rnp_ads; rnp_finance is its own frame).
SALES_COLUMNS = [
    "orders_count", "orders_sum", "cancellations_count", "cancellations_sum", "buyouts_count", "buyouts_sum",
    "returns_count", "returns_sum", "avg_order_price", "avg_spp_percent",
]  # fmt: skip
ADS_COLUMNS = [
    "ad_views", "ad_clicks", "ad_spend", "ad_carts", "ad_orders", "ad_orders_sum", "ad_ctr_percent", "ad_cpc", "ad_cpm",
]  # fmt: skip
MONEY = [
    "orders_sum", "cancellations_sum", "buyouts_sum", "returns_sum", "ad_spend", "ad_orders_sum",
    "realization", "payout", "commission", "acquiring", "logistics", "storage", "acceptance", "penalties",
    "other_deductions",
]  # fmt: skip


def write_rollups(conn: psycopg.Connection, rollups: dict[str, pd.DataFrame]) -> None:
    """The pandas rollups into tables pandas_<table> (columns as the SQL table's), for ``compare``."""
    with conn.transaction():
        for table, frame in rollups.items():
            target = f"pandas_{table}"
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(target)))
            conn.execute(
                sql.SQL("CREATE TABLE {} AS SELECT * FROM {} LIMIT 0").format(
                    sql.Identifier(target), sql.Identifier(table)
                )
            )
            out = frame.assign(cabinet_id=CABINET, **{m: frame[m] / 100 for m in MONEY if m in frame})
            columns = ["cabinet_id", *frame.columns]
            with conn.cursor() as cur:
                statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(
                    sql.Identifier(target), sql.SQL(", ").join(map(sql.Identifier, columns))
                )
                with cur.copy(statement) as copy:
                    copy.write(out[columns].to_csv(index=False, header=False))


TITLE = "РНП recompute of one cabinet (90 days × 5,000 products) and of one changed day: SQL vs pandas"
OPTIONS = [
    Option("days", 90, 10, "days of the cabinet's feeds"),
    Option("products", 5000, 300, "products (nm_id) of the cabinet"),
    Option("repeat", 3, 1, "rounds (SQL then pandas, each round on emptied tables); the fastest of each is reported"),
]

#: Ratios pandas computes in floats and rounds half to even: compared within a kopeck / 0.01 point.
RATIOS = (
    "avg_order_price", "avg_spp_percent", "ad_ctr_percent", "ad_cpc", "ad_cpm", "drr_of_orders_sum_percent",
    "drr_of_ad_orders_sum_percent",
)  # fmt: skip


def run(bench: Bench, opts: Any) -> None:
    days, products = opts.days, opts.products
    with bench.database("rnp_bench") as url:
        upgrade(url, SCHEMA)
        last = today_moscow()
        first = last - timedelta(days=days - 1)
        with connect(url, SCHEMA, autocommit=True) as conn:
            t = time.perf_counter()
            # Several statements with parameters: bound on the client.
            with psycopg.ClientCursor(conn) as cur:
                cur.execute(
                    GENERATE, {"cabinet": CABINET, "first": first, "last": last, "days": days, "products": products}
                )
            counts = {
                f: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(f))).fetchone()[0]  # type: ignore[index]
                for f in FEEDS
            }
            generated = time.perf_counter() - t
        inputs = sum(counts.values())
        harness.say(f"  1 cabinet × {days} days × {products} products; feeds generated in {generated:.1f} s: "
                    + ", ".join(f"{k} {v:,}" for k, v in counts.items()) + f"; {inputs:,} input rows")  # fmt: skip

        warehouse = Warehouse(database_url=url, env=SCHEMA.removeprefix("optima_"))
        pairs = [(CABINET, first + timedelta(days=n)) for n in range(days)]
        # One changed day (a late cancellation, as an increment brings it): the re-aggregation of that
        # one (cabinet, day), SQL against pandas doing the same day. Each round flips one more order.
        changed = last - timedelta(days=min(days - 1, 20))
        fill, again, one_day, fill_pd, one_day_pd = [], [], [], [], []
        again_written: list[int] = []
        loads: list[float] = []
        for n in range(1, opts.repeat + 1):
            harness.say(f"  round {n}/{opts.repeat}, load average {harness.load_average()}:")
            with connect(url, SCHEMA, autocommit=True) as conn:
                conn.execute(sql.SQL("TRUNCATE {}").format(sql.SQL(", ").join(map(sql.Identifier, TABLES))))
                # Each timed phase starts with no checkpoint under way: the previous phase's WAL (a
                # round writes about 1.5 GB) starts one, which then runs for minutes beside whatever
                # comes next and cost a first fill 0.6-0.8 s (the pandas side gets the same).
                conn.execute("CHECKPOINT")
            harness.say(
                f"  SQL in PostgreSQL (one run over the range: at most {PARTITIONS_PER_TRANSACTION} days per transaction, "
                f"{RECOMPUTE_CONNECTIONS} transactions at once, each over the four tables):"
            )
            fill.append(recompute_all(warehouse, pairs, "first fill (all four tables written)")[0])
            took, written = recompute_all(warehouse, pairs, "again, nothing changed (watermarks: nothing to recompute)")
            again.append(took)
            again_written.append(written)
            with connect(url, SCHEMA, autocommit=True) as conn:
                conn.execute(
                    "UPDATE wb_orders SET is_cancel = NOT is_cancel, last_change_date = now() "
                    "WHERE ctid = (SELECT ctid FROM wb_orders WHERE cabinet_id = %s AND day = %s ORDER BY srid "
                    "OFFSET %s LIMIT 1)",
                    (CABINET, changed, n),
                )
            one_day.append(recompute_all(warehouse, [(CABINET, changed)], f"one changed day ({changed})")[0])
            # The watermarks skipped everything else: recomputing every pair regardless (what the
            # implementation before the watermarks did) must find nothing to write in any table.
            _, stale = recompute_all(warehouse, pairs, "check: the whole range recomputed regardless of watermarks",
                                     force=True)  # fmt: skip
            if stale:
                raise SystemExit(f"the watermarks left {stale:,} rows stale: recomputing everything rewrote them")
            harness.say("    the four tables equal a recompute of every pair cell by cell (0 rows differ)")
            with connect(url, SCHEMA, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS sql_mart")
                conn.execute("CREATE TABLE sql_mart AS SELECT * FROM rnp_daily")
                harness.say(
                    "  pandas baseline (COPY out, groupby/merge with money in kopecks, replace rnp_daily's rows by COPY):"
                )
                conn.execute("CHECKPOINT")
                mart, timings, rollups = pandas_rollup(conn, first, last)
                timings["write"] = write_frame(conn, mart, first, last)
                fill_pd.append(sum(timings.values()))
                harness.say("    " + ", ".join(f"{step} {took:.2f} s" for step, took in timings.items())
                            + f", total {fill_pd[-1]:.2f} s")  # fmt: skip
                compare(conn, "rnp_daily", "rnp_daily", "sql_mart")
                # The rollups SQL wrote (and the mart read), against pandas' on the way to its mart.
                write_rollups(conn, rollups)
                for table in TABLES[:-1]:
                    compare(conn, table, f"pandas_{table}", table)
                day_mart, day_timings, _ = pandas_rollup(conn, changed, changed)
                day_timings["write"] = write_frame(conn, day_mart, changed, changed)
                one_day_pd.append(sum(day_timings.values()))
                harness.say(f"    one day {one_day_pd[-1]:.2f} s")
                compare(conn, "rnp_daily", "rnp_daily", "sql_mart")
            loads.append(harness.load_average())
            harness.say(f"    load average {loads[-1]}")

    size = f"{days} days × {products:,} products"
    load = max(loads)
    bench.figure(f"recompute one cabinet, {size}, first fill, all four tables (SQL, fastest of {opts.repeat})",
                 min(fill) * 1000, "ms", baseline_name="pandas, rnp_daily only", baseline=min(fill_pd) * 1000,
                 higher_is_better=False, load=load, note=f"{inputs:,} input rows")  # fmt: skip
    bench.figure(f"recompute one cabinet, {size}, nothing changed ({max(again_written):,} rows written, SQL)",
                 min(again) * 1000, "ms",
                 baseline_name="pandas", baseline=min(fill_pd) * 1000, higher_is_better=False, load=load)  # fmt: skip
    bench.figure("re-aggregate one changed day (SQL)", min(one_day) * 1000, "ms",
                 baseline_name="pandas, same day", baseline=min(one_day_pd) * 1000, higher_is_better=False,
                 load=load)  # fmt: skip


def compare(conn: psycopg.Connection, table: str, pandas_table: str, sql_table: str) -> None:
    """The rows pandas computed (``pandas_table``) must equal the ones SQL wrote (``sql_table``) cell
    by cell: the same rows, every count and money column exact, the ratios within 0.01 (see RATIOS)."""
    columns = value_columns(conn, table)
    differs = [
        sql.SQL("(p.{c} IS NULL) <> (s.{c} IS NULL) OR abs(p.{c} - s.{c}) > 0.01").format(c=sql.Identifier(c))
        if c in RATIOS
        else sql.SQL("p.{c} IS DISTINCT FROM s.{c}").format(c=sql.Identifier(c))
        for c in columns
    ]
    joined = sql.SQL(
        "FROM {} p FULL JOIN {} s ON (p.cabinet_id, p.day, p.nm_id) = (s.cabinet_id, s.day, s.nm_id)"
    ).format(sql.Identifier(pandas_table), sql.Identifier(sql_table))
    missing = sql.SQL("p.nm_id IS NULL OR s.nm_id IS NULL")
    row = conn.execute(
        sql.SQL("SELECT count(*), count(*) FILTER (WHERE {}), {} {}").format(
            missing, sql.SQL(", ").join(sql.SQL("count(*) FILTER (WHERE {})").format(d) for d in differs), joined
        )
    ).fetchone()
    assert row is not None
    rows, mismatches = row[0], {"(row only on one side)": row[1]} | dict(zip(columns, row[2:], strict=True))
    bad = {c: n for c, n in mismatches.items() if n}
    for c, n in bad.items():
        condition = missing if c.startswith("(") else differs[columns.index(c)]
        shown = columns[0] if c.startswith("(") else c
        examples = conn.execute(
            sql.SQL("SELECT coalesce(p.day, s.day), coalesce(p.nm_id, s.nm_id), {c}, {d} {j} WHERE {w} LIMIT 3").format(
                c=sql.Identifier("p", shown), d=sql.Identifier("s", shown), j=joined, w=condition
            )
        ).fetchall()
        harness.say(f"    MISMATCH {table}.{c}: {n:,} rows, e.g. (day, nm_id, pandas, SQL) {examples}")
    if bad:
        raise SystemExit(f"pandas and SQL disagree in {len(bad)} columns of {table}")
    harness.say(f"    {table}: pandas and SQL agree cell by cell, {rows:,} rows × {len(columns)} columns")
    if table == "rnp_daily":
        totals = conn.execute(
            sql.SQL("SELECT sum(orders_sum), sum(payout), sum(ad_spend) FROM {}").format(sql.Identifier(pandas_table))
        ).fetchone()
        assert totals is not None
        harness.say(f"    totals: orders_sum {totals[0]:,.2f}, payout {totals[1]:,.2f}, ad_spend {totals[2]:,.2f}")


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
