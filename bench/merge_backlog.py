"""Benchmark: the nightly merge (rnp-merge-sync) at N cabinets, with and without a backlog of stale days.

    python bench/merge_backlog.py [--quick] [--cabinets 1000] [--products 10] [--days 30] [--stale 5]

Generates the feeds of ``--cabinets`` cabinets (``--products`` products, ``--days`` days each) in a
scratch database and fills their РНП once. Then it times what one nightly merge does, as its runs
would: the plan (``mart.plan.plan_merge_sync``: the window, the days to heal, where the window's
report lines belong, and, since issue 38, every day the watermarks say is due) and the forced
recompute of every run it plans (``recompute_tables(..., force=True)`` per planned rectangle, as the
``rnp`` op does for a run tagged ``optima/rnp-recompute: all``).

- a night with no stale backlog, planned as before issue 38 (no stale read): the baseline;
- the same night planned with the stale read (nothing stale: what the read costs);
- a night after ``--stale`` days of every cabinet, older than the 3-day window, went stale (an order
  of each flipped behind the planner's back, as a re-dated order did before issue 38): the merge
  recomputes them, against the night without a backlog, measured in the same run. It then checks
  that no pair is due any more (and fails otherwise). "Stale" in its figures is such a due pair.

And the read of the due pairs alone (``sql/due_pairs.sql``) against the read the plan always made
(``sql/days_to_heal.sql``), at N cabinets.
"""

from __future__ import annotations

import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from optima_pipelines.mart.plan import (
    HEAL_DAYS,
    MERGE_WINDOW_DAYS,
    Demands,
    days_to_heal,
    due_pairs,
    merge_sync_demands,
    plan_merge_sync,
    plan_recomputes,
    source_order_days,
)
from optima_pipelines.mart.recompute import TABLES, recompute_tables
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.timeutil import today_moscow


def due(conn: psycopg.Connection, cabinets: list[str], first: date, last: date) -> dict[tuple[str, date], set[str]]:
    """The pairs the watermarks say are due (the plan's read: ``mart.plan.due_pairs``)."""
    return due_pairs(conn, first, last, cabinets).tables


TITLE = "the nightly merge at N cabinets, with and without a backlog of stale days"
OPTIONS = [
    Option("cabinets", 1000, 20, "cabinets"),
    Option("products", 10, 4, "products per cabinet"),
    Option("days", 30, 10, "days of feeds per cabinet, today included"),
    Option("stale", 5, 2, "days per cabinet, older than the 3-day window, made stale for the backlog night"),
]
SCHEMA = "optima_bench"

# Deterministic feeds of many cabinets, generated inside PostgreSQL (bench/rnp_recompute.py's, by cabinet).
GENERATE = """
CREATE FUNCTION pg_temp.h(a bigint, b bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
AS $$ SELECT abs((a * 2654435761 + b * 40503) %% 1000003) $$;

INSERT INTO cabinets (id, name, status)
SELECT 'b' || lpad(c::text, 5, '0'), 'bench ' || c, 'active' FROM generate_series(1, %(cabinets)s) AS c;

INSERT INTO wb_orders (cabinet_id, srid, day, date, last_change_date, nm_id, total_price, price_with_disc,
                       finished_price, spp, is_cancel)
SELECT 'b' || lpad(c::text, 5, '0'), 'o' || c || '.' || n || '.' || p || '.' || k, %(first)s::date + n,
       (%(first)s::date + n + time '12:00') AT TIME ZONE 'Europe/Moscow', now(), p,
       2 * (500 + p %% 97 * 10 + k * 0.37), 500 + p %% 97 * 10 + k * 0.37, 400 + p %% 97 * 10,
       pg_temp.h(p, n) %% 30, pg_temp.h(p + k, n + c) %% 10 = 0
FROM generate_series(1, %(cabinets)s) AS c, generate_series(0, %(days)s - 1) AS n,
     generate_series(1, %(products)s) AS p, LATERAL generate_series(1, (pg_temp.h(p + c, n) %% 3)::int) AS k;

INSERT INTO wb_sales (cabinet_id, sale_id, srid, day, date, last_change_date, is_return, nm_id, price_with_disc,
                      for_pay, finished_price)
SELECT cabinet_id, CASE WHEN pg_temp.h(nm_id, length(srid)) %% 20 = 1 THEN 'R' ELSE 'S' END || srid, srid,
       least(day + 2, %(last)s::date), date + interval '2 days', now(),
       pg_temp.h(nm_id, length(srid)) %% 20 = 1, nm_id, price_with_disc, price_with_disc * 0.8, finished_price
FROM wb_orders WHERE NOT is_cancel AND pg_temp.h(nm_id, length(srid)) %% 3 <> 0;

INSERT INTO ad_campaign_stats (cabinet_id, advert_id, day, app_type, nm_id, is_associated, views, clicks, atbs,
                               orders, sum, sum_price)
SELECT 'b' || lpad(c::text, 5, '0'), 1000 + p %% 3, %(first)s::date + n, app, p, false, 100 + pg_temp.h(p, n) %% 900,
       pg_temp.h(p, n + app) %% 40, pg_temp.h(p, n) %% 5, pg_temp.h(p, n) %% 3,
       round((pg_temp.h(p, n + app) %% 40) * 7.35 + 0.11, 2), (pg_temp.h(p, n) %% 3) * 612.5
FROM generate_series(1, %(cabinets)s) AS c, generate_series(0, %(days)s - 1) AS n,
     generate_series(1, %(products)s) AS p, unnest(ARRAY[1, 32, 64]) AS app
WHERE p %% 2 = 0;

INSERT INTO wb_report_lines (cabinet_id, rrd_id, day, rr_date, nm_id, srid, doc_type_name, retail_amount, for_pay,
                             vw, vw_nds, acquiring_fee, delivery_service)
SELECT cabinet_id, 2 * row_number() OVER (), least(day + 1, %(last)s::date), least(day + 1, %(last)s::date), nm_id,
       srid, CASE WHEN is_return THEN 'Возврат' ELSE 'Продажа' END, price_with_disc, round(price_with_disc * 0.8, 2),
       round(price_with_disc * 0.12, 2), round(price_with_disc * 0.024, 2), round(price_with_disc * 0.015, 2), 0
FROM wb_sales;

INSERT INTO rnp_funnel_stats (cabinet_id, day, nm_id, open_count, cart_count, order_count, add_to_cart_conversion,
                              cart_to_order_conversion, buyout_percent)
SELECT 'b' || lpad(c::text, 5, '0'), %(first)s::date + n, p, pg_temp.h(p, n) %% 500, pg_temp.h(p, n) %% 50,
       pg_temp.h(p, n) %% 4, pg_temp.h(p, n) %% 20, pg_temp.h(p, n + 1) %% 60, pg_temp.h(p, n + 2) %% 100
FROM generate_series(1, %(cabinets)s) AS c, generate_series(0, %(days)s - 1) AS n,
     generate_series(1, %(products)s) AS p;
"""

#: One order of each chosen (cabinet, day) flips its cancellation behind the planner's back: the
#: feeds' triggers make the pair stale and no feed event names it.
BACKLOG = """
UPDATE wb_orders o SET is_cancel = NOT o.is_cancel, last_change_date = now()
FROM (SELECT DISTINCT ON (cabinet_id, day) cabinet_id, srid
      FROM wb_orders
      WHERE day = ANY(%(days)s::date[])
      ORDER BY cabinet_id, day, srid) x
WHERE o.cabinet_id = x.cabinet_id AND o.srid = x.srid
"""


def recompute_plan(warehouse: Warehouse, demands: Demands, cabinets: list[str]) -> tuple[float, int, int]:
    """Seconds, runs and pairs: every run the plan makes, recomputed as the merge's runs are (forced)."""
    runs = plan_recomputes(demands, cabinets)
    started = time.perf_counter()
    for run in runs:
        recompute_tables(warehouse.connect, dict.fromkeys(run.asset_keys, run.pairs()), force=True)
    return time.perf_counter() - started, len(runs), sum(r.partitions for r in runs)


def old_plan(conn: psycopg.Connection, cabinets: list[str], today: date, first_day: date) -> Demands:
    """The nightly merge's plan before issue 38: the window, the days to heal, where the window's lines belong."""
    healed = days_to_heal(conn, cabinets, max(first_day, today - timedelta(HEAL_DAYS - 1)), today)
    placed = source_order_days(conn, cabinets, today - timedelta(MERGE_WINDOW_DAYS - 1), today)
    return merge_sync_demands(cabinets, today, first_day, healed, placed)


def night(bench_label: str, warehouse: Warehouse, url: str, cabinets: list[str], today: date, first: date, *,
          old: bool = False) -> dict[str, Any]:  # fmt: skip
    with connect(url, SCHEMA, autocommit=True) as conn:
        started = time.perf_counter()
        if old:
            demands, stale = old_plan(conn, cabinets, today, first), []
        else:
            plan = plan_merge_sync(conn, cabinets, today, first)
            demands, stale = plan.demands, plan.stale
        planned = time.perf_counter() - started
    took, runs, pairs = recompute_plan(warehouse, demands, cabinets)
    harness.say(
        f"    {bench_label}: plan {planned:.2f} s ({len(stale):,} stale days), {runs} runs over {pairs:,} "
        f"(cabinet, day)s recomputed in {took:.1f} s, total {planned + took:.1f} s"
    )
    return {"plan": planned, "recompute": took, "total": planned + took, "pairs": pairs, "stale": len(stale)}


def best_read(url: str, statement: Any, cabinets: list[str], first: date, last: date, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        with connect(url, SCHEMA, autocommit=True) as conn:
            started = time.perf_counter()
            statement(conn, cabinets, first, last)
            best = min(best, time.perf_counter() - started)
    return best


def run(bench: Bench, opts: Any) -> None:
    today = today_moscow()
    first = today - timedelta(days=opts.days - 1)
    cabinets = [f"b{c:05d}" for c in range(1, opts.cabinets + 1)]
    with bench.database("merge_backlog") as url:
        upgrade(url, SCHEMA)
        with connect(url, SCHEMA, autocommit=True) as conn:
            started = time.perf_counter()
            with psycopg.ClientCursor(conn) as cur:
                cur.execute(
                    GENERATE,
                    {"cabinets": opts.cabinets, "products": opts.products, "days": opts.days, "first": first,
                     "last": today},
                )  # fmt: skip
            orders = conn.execute("SELECT count(*) FROM wb_orders").fetchone()
            conn.execute("ANALYZE")
            harness.say(
                f"  {opts.cabinets:,} cabinets × {opts.days} days × {opts.products} products: "
                f"{orders[0] if orders else 0:,} orders and the other feeds generated in {time.perf_counter() - started:.1f} s"
            )
        warehouse = Warehouse(database_url=url, env=SCHEMA.removeprefix("optima_"))
        pairs = [(c, first + timedelta(days=n)) for c in cabinets for n in range(opts.days)]
        started = time.perf_counter()
        recompute_tables(warehouse.connect, dict.fromkeys(TABLES, pairs), force=True)
        harness.say(f"  first fill of {len(pairs):,} (cabinet, day)s: {time.perf_counter() - started:.1f} s")

        harness.say(f"  nights at {opts.cabinets:,} cabinets (load average {harness.load_average()}):")
        before = night("no backlog, planned as before issue 38 (no stale read)", warehouse, url, cabinets, today,
                       first, old=True)  # fmt: skip
        quiet = night("no backlog, planned with the stale read", warehouse, url, cabinets, today, first)
        older = [today - timedelta(days=MERGE_WINDOW_DAYS + 1 + 2 * n) for n in range(opts.stale)]
        older = [d for d in older if d >= first]
        with connect(url, SCHEMA, autocommit=True) as conn:
            flipped = conn.execute(BACKLOG, {"days": older}).rowcount
            stale_now = len(due(conn, cabinets, first, today))
        harness.say(
            f"  backlog: {flipped:,} orders flipped behind the planner's back: {stale_now:,} stale (cabinet, day)s"
        )
        backlog = night(f"a backlog of {len(older)} stale days a cabinet", warehouse, url, cabinets, today, first)
        with connect(url, SCHEMA, autocommit=True) as conn:
            left = due(conn, cabinets, first, today)
        if left:
            raise SystemExit(f"the nightly merge left {len(left):,} stale (cabinet, day)s, e.g. {sorted(left)[:3]}")
        harness.say("    after it no (cabinet, day) is stale")
        stale_read = best_read(url, due, cabinets, first, today)
        heal_read = best_read(url, days_to_heal, cabinets, max(first, today - timedelta(HEAL_DAYS - 1)), today)
    load = harness.load_average()
    size = f"{opts.cabinets:,} cabinets"
    bench.figure(f"nightly merge, {size}, no stale backlog (plan + forced recompute)", quiet["total"], "s",
                 baseline_name="the same night planned as before issue 38", baseline=before["total"],
                 higher_is_better=False, load=load, note=f"{quiet['pairs']:,} (cabinet, day)s")  # fmt: skip
    bench.figure(f"nightly merge, {size}, backlog of {len(older)} stale days a cabinet ({backlog['stale']:,} healed)",
                 backlog["total"], "s", baseline_name="the night without a backlog (same run)",
                 baseline=quiet["total"], higher_is_better=False, load=load,
                 note=f"{backlog['pairs']:,} (cabinet, day)s")  # fmt: skip
    bench.figure(f"the stale read of the plan, {size}", stale_read * 1000, "ms",
                 baseline_name="the plan's read of the days to heal", baseline=heal_read * 1000,
                 higher_is_better=False, load=load)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
