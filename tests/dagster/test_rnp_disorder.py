"""The disorder suite: under WB's disorder, every rnp_daily cell equals the raw tables, to the kopeck.

For each seed (``--seeds N``, default 5) a small world (one cabinet, two in every fifth seed) with
every disorder mode of the simulator on (``wb_simulator.disorder``: orders delivered after their
report lines, late cancellations, foreign returns, service lines on nmId 0, short, repeated and
failing finance pages, past ad days revised with rows dropped, orders and sales re-dated a day
earlier) goes through a random sequence of increments, backfills, user imports, finance, ad, funnel and
stock syncs, clock moves and re-aggregations: the real jobs in process, and the real
``rnp_reaggregate_sensor`` evaluated on the instance (its run requests executed as the daemon
would). At the end (every feed synced once more, the sensor run until it has nothing left):

- every finance page WB delivered intact was stored, even by a sync that failed later on;
- ``ad_campaign_stats`` holds exactly what WB's fullstats says now for the ad sync's window (a
  revised day's dropped rows are gone), and ``wb_orders`` / ``wb_sales`` hold every row on the day
  WB dates it now (a re-dated row on its new day);
- ``wb_report_lines`` holds every line WB has for the sync's window (paged until the 204);
- every ``rnp_daily`` cell of every cabinet, day and product equals ``expected_mart``, computed
  here in plain Python from rows of the raw tables with docs/data.md's definitions (never the
  project's SQL), and no row is missing or extra;
- the latest evaluation of every asset check, per partition (what the UI shows), passed.

A failure names the seed, cabinet, day, product, column and both numbers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from dagster import build_sensor_context

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor
from optima_pipelines.sync import ads
from optima_pipelines.sync import finance as fin
from optima_pipelines.timeutil import MOSCOW, today_moscow
from tests.rnp_feeds import execute_request
from tests.wb_syncs import TIME_SCALE, run_job, served
from wb_simulator import CabinetSpec, Disorder, Simulator

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

#: The simulator starts this far behind the real clock (the syncs take "today" from it), so that the
#: sequence can move WB's clock forward without reaching days the deployment calls the future (and
#: WB still has statistics for the ad sync's days).
LAG = timedelta(days=1)
#: Random steps per seed, before the final sync of every feed.
STEPS = 7


#: Every mode on; the finance report in many short pages, so that a sync often fails on a later page.
DISORDER = Disorder(
    late_orders=0.3,
    late_cancellations=0.5,
    foreign_returns=0.3,
    service_lines=0.3,
    short_pages=0.8,
    repeated_lines=0.4,
    page_failures=0.25,
    revised_ad_days=0.5,
    redated_orders=0.3,
    redated_sales=0.3,
)


def cabinets_of(seed: int) -> tuple[str, ...]:
    """One cabinet, and two in every fifth seed (so that a bug mixing cabinets shows): each cabinet
    doubles the partitions the re-aggregation recomputes, the suite's main cost."""
    return ("d1", "d2") if seed % 5 == 0 else ("d1",)


def world(seed: int) -> Simulator:
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0) - LAG
    specs = [
        CabinetSpec(
            id=cabinet,
            products=3 + i,
            orders_per_day=8 + 4 * i,
            history_days=10,
            campaigns=2,
            cancel_rate=0.3,
            return_rate=0.2,
            disorder=DISORDER,
        )
        for i, cabinet in enumerate(cabinets_of(seed))
    ]
    return Simulator(seed=seed, cabinets=specs, time_scale=TIME_SCALE, now=now)


@dataclass
class Story:
    """What happened to one seed, for the failure message."""

    seed: int
    steps: list[str] = field(default_factory=list)
    #: (check, partition) → (passed, description) of its latest evaluation: what the UI shows.
    checks: dict[tuple[str, str], tuple[bool, str]] = field(default_factory=dict)

    def failed_checks(self) -> list[str]:
        return [f"{name} {partition}: {text}" for (name, partition), (ok, text) in self.checks.items() if not ok]

    def __str__(self) -> str:
        return f"seed {self.seed} (rerun: pytest -k 'disorder and seed{self.seed}' --seeds {self.seed}); steps: " + (
            ", ".join(self.steps)
        )


def reaggregate(instance, cursor: str | None, story: Story) -> str | None:
    """One tick of the real re-aggregation sensor, its run requests executed; returns the new cursor."""
    with build_sensor_context(instance=instance, cursor=cursor, resources=RESOURCES) as context:
        result = rnp_reaggregate_sensor(context)
    for request in getattr(result, "run_requests", None) or []:
        run = execute_request(instance, request)
        for event in run.all_events:
            if event.event_type_value == "ASSET_CHECK_EVALUATION":
                evaluation = event.event_specific_data
                key = (evaluation.check_name, str(evaluation.partition))
                story.checks[key] = (evaluation.passed, str(evaluation.description))
    return getattr(result, "cursor", None) or cursor


def sync_finance(sim: Simulator, instance, conn, cabinet: str, story: Story) -> bool:
    """The nightly finance sync (it may fail on a broken page); every intact page WB served is stored."""
    ok = run_job("finance_sync", instance, cabinet).success
    pages = sim.ledgers[cabinet].pages
    assert pages is not None
    stored = {r for (r,) in conn.execute("SELECT rrd_id FROM wb_report_lines WHERE cabinet_id = %s", (cabinet,))}
    lost = pages.served - stored
    assert not lost, (
        f"{story}: {len(lost)} report lines WB delivered intact to {cabinet} were not stored: {sorted(lost)[:5]}"
    )
    return ok


def test_disorder_every_rnp_cell_equals_the_raw_tables(
    disorder_seed, optima_env, settings, warehouse_conn, dagster_instance, monkeypatch
):
    seed = disorder_seed
    rng = random.Random(seed)
    sim = world(seed)
    cabinets = cabinets_of(seed)
    story = Story(seed)
    conn, instance = warehouse_conn, dagster_instance
    moved = timedelta(0)
    cursor: str | None = None
    with served(sim, monkeypatch, conn, settings, instance):
        for _ in range(STEPS):
            cabinet = rng.choice(cabinets)
            action = rng.choice(
                [
                    "increment",
                    "increment",
                    "backfill",
                    "import",
                    "finance",
                    "finance",
                    "ads",
                    "ads",
                    "snapshot",
                    "advance",
                    "reaggregate",
                    "reaggregate",
                ]
            )
            today = today_moscow()
            if action == "increment":
                assert run_job("digitization_increment", instance, cabinet).success, str(story)
            elif action == "backfill":
                days = rng.randint(2, 6)
                assert run_job("digitization_backfill", instance, cabinet, window_days=days).success, str(story)
                action += f"({days}d)"
            elif action == "import":
                first = today - timedelta(days=rng.randint(1, 6))
                assert run_job("digitization_import", instance, cabinet, date_from=first.isoformat()).success, str(
                    story
                )
                action += f"(from {first})"
            elif action == "finance":
                action += "" if sync_finance(sim, instance, conn, cabinet, story) else "(failed)"
            elif action == "ads":
                assert run_job("ads_sync", instance, cabinet).success, str(story)
            elif action == "snapshot":
                job = rng.choice(["funnel_sync", "inventory_sync"])
                assert run_job(job, instance, cabinet).success, str(story)
                action = job
            elif action == "advance":
                hours = rng.randint(3, 10)
                if moved + timedelta(hours=hours) < LAG - timedelta(hours=2):
                    sim.advance(timedelta(hours=hours))
                    moved += timedelta(hours=hours)
                action += f"({hours}h)"
            else:
                cursor = reaggregate(instance, cursor, story)
            story.steps.append(f"{action} {cabinet}" if action != "reaggregate" else action)

        # The end of the story: the clock moves on by what is left of the lag (what WB revises after
        # the syncs above have loaded it comes now), every feed once more, then the sensor until it
        # has nothing left.
        if LAG - timedelta(hours=2) - moved > timedelta(0):
            sim.advance(LAG - timedelta(hours=2) - moved)
        for cabinet in cabinets:
            assert run_job("digitization_increment", instance, cabinet).success, str(story)
            assert run_job("ads_sync", instance, cabinet).success, str(story)
            for _ in range(6):
                if sync_finance(sim, instance, conn, cabinet, story):
                    break
            else:
                raise AssertionError(f"{story}: the finance sync of {cabinet} failed 6 times in a row")
        for _ in range(10):
            before = cursor
            cursor = reaggregate(instance, cursor, story)
            if cursor == before:
                break

    first, last = fin.report_window()
    for cabinet in cabinets:
        wb_lines = {line["rrdId"] for line in sim.truth.report_lines(cabinet, first, last)}
        ours = {
            r
            for (r,) in conn.execute(
                "SELECT rrd_id FROM wb_report_lines WHERE cabinet_id = %s AND day BETWEEN %s AND %s",
                (cabinet, first, last),
            )
        }
        missing = wb_lines - ours
        assert not missing, f"{story}: {len(missing)} of WB's {len(wb_lines)} report lines of {cabinet} never stored"

    for cabinet in cabinets:
        wrong = stored_as_wb_says(sim, conn, cabinet)
        assert not wrong, f"{story}: the raw tables of {cabinet} differ from what WB says now:\n" + "\n".join(
            wrong[:25]
        )

    mismatches = compare(expected_mart(conn), actual_mart(conn))
    assert not mismatches, f"{story}: {len(mismatches)} rnp_daily cells differ from the raw tables:\n" + "\n".join(
        mismatches[:25]
    )
    # The latest evaluation of each check and partition. (An earlier one may fail for a moment: the
    # runs of one tick are separate, and a finance run's merge can precede the sales run's.)
    assert story.checks, f"{story}: no asset check ran"
    failed = story.failed_checks()
    assert not failed, f"{story}: asset checks failed:\n" + "\n".join(failed[:25])


def stored_as_wb_says(sim: Simulator, conn, cabinet: str) -> list[str]:
    """Where the raw tables differ from WB's answers now: each order and sale on the day WB dates it,
    and the ad sync's window (the days WB has statistics for) row for row with fullstats."""
    out = []
    for table, key, rows_now in (
        ("wb_orders", "srid", sim.truth.orders(cabinet)),
        ("wb_sales", "sale_id", sim.truth.sales(cabinet)),
    ):
        wb_key = "srid" if key == "srid" else "saleID"
        ours = dict(conn.execute(f"SELECT {key}, day FROM {table} WHERE cabinet_id = %s", (cabinet,)).fetchall())
        for row in rows_now:
            day = date.fromisoformat(row["date"][:10])
            if ours.get(row[wb_key]) != day:
                out.append(f"{table} {row[wb_key]}: WB dates it {day}, the table has {ours.get(row[wb_key])}")
    first, _ = ads.ads_window()
    day = first
    while day < sim.today():
        wb_rows = {
            (advert, app["appType"], nm["nmId"]): Decimal(str(nm["sum"]))
            for advert, item in sim.truth.ad_stats(cabinet, day).items()
            for app in item["apps"]
            for nm in app["nms"]
        }
        stored = {
            (advert, app, nm): spend
            for advert, app, nm, spend in conn.execute(
                "SELECT advert_id, app_type, nm_id, sum FROM ad_campaign_stats WHERE cabinet_id = %s AND day = %s",
                (cabinet, day),
            )
        }
        for k in sorted(set(wb_rows) | set(stored)):
            if wb_rows.get(k) != stored.get(k):
                out.append(
                    f"ad_campaign_stats {day} (advert, app, nm) {k}: WB says {wb_rows.get(k)}, stored {stored.get(k)}"
                )
        day += timedelta(days=1)
    return out


# -- the independent computation: rnp_daily from the raw tables, docs/data.md's definitions ---------

Key = tuple[str, date, int]
ZERO = Decimal(0)
ADDITIVE = (
    "orders_count", "orders_sum", "cancellations_count", "cancellations_sum", "buyouts_count", "buyouts_sum",
    "returns_count", "returns_sum", "ad_views", "ad_clicks", "ad_spend", "ad_carts", "ad_orders", "ad_orders_sum",
    "realization", "payout", "commission", "acquiring", "logistics", "storage", "acceptance", "penalties",
    "other_deductions",
)  # fmt: skip
COLUMNS = (
    *ADDITIVE, "avg_order_price", "avg_spp_percent", "ad_ctr_percent", "ad_cpc", "ad_cpm",
    "drr_of_orders_sum_percent", "drr_of_ad_orders_sum_percent", "card_opens", "add_to_cart",
    "add_to_cart_conversion_percent", "cart_to_order_conversion_percent", "funnel_buyout_percent", "stock_qty",
    "stock_in_way_to_client", "stock_in_way_from_client",
)  # fmt: skip


def ratio(numerator: Decimal, denominator: Decimal, scale: int = 100) -> Decimal | None:
    """``scale × numerator / denominator`` to 2 decimals, half away from zero; None over 0."""
    if not denominator:
        return None
    return (Decimal(scale) * numerator / denominator).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def rows(conn, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def expected_mart(conn) -> dict[Key, dict[str, Any]]:
    cells: dict[Key, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(ADDITIVE, ZERO))
    spp: dict[Key, list[Decimal]] = defaultdict(list)
    order_day: dict[tuple[str, str], date] = {}
    for cabinet, srid, day, nm, price, cancelled, order_spp in rows(
        conn, "SELECT cabinet_id, srid, day, nm_id, price_with_disc, is_cancel, spp FROM wb_orders"
    ):
        order_day[(cabinet, srid)] = day
        cell = cells[(cabinet, day, nm)]
        cell["orders_count"] += 1
        cell["orders_sum"] += price
        if cancelled:
            cell["cancellations_count"] += 1
            cell["cancellations_sum"] += price
        if order_spp is not None:
            spp[(cabinet, day, nm)].append(order_spp)
    for cabinet, day, nm, is_return, price in rows(
        conn, "SELECT cabinet_id, day, nm_id, is_return, price_with_disc FROM wb_sales"
    ):
        cell = cells[(cabinet, day, nm)]
        kind = "returns" if is_return else "buyouts"
        cell[f"{kind}_count"] += 1
        cell[f"{kind}_sum"] += abs(price) if is_return else price
    ad_keys = set()
    for cabinet, day, nm, views, clicks, atbs, orders, spend, orders_sum in rows(
        conn, "SELECT cabinet_id, day, nm_id, views, clicks, atbs, orders, sum, sum_price FROM ad_campaign_stats"
    ):
        ad_keys.add((cabinet, day, nm))
        cell = cells[(cabinet, day, nm)]
        cell["ad_views"] += views
        cell["ad_clicks"] += clicks
        cell["ad_carts"] += atbs
        cell["ad_orders"] += orders
        cell["ad_spend"] += spend
        cell["ad_orders_sum"] += orders_sum
    for cabinet, line_day, nm, srid, doc, *money in rows(
        conn,
        "SELECT cabinet_id, day, nm_id, srid, doc_type_name, retail_amount, for_pay, vw, vw_nds, acquiring_fee, "
        "delivery_service, paid_storage, paid_acceptance, penalty, deduction FROM wb_report_lines",
    ):
        retail, for_pay, vw, vw_nds, acquiring, delivery, storage, acceptance, penalty, deduction = (
            v or ZERO for v in money
        )
        # A line belongs to the day of its source order, else to its own day; no product: nm_id 0.
        cell = cells[(cabinet, order_day.get((cabinet, srid), line_day), nm or 0)]
        sign = -1 if doc == "Возврат" else 1
        cell["realization"] += sign * retail
        cell["payout"] += sign * for_pay
        cell["commission"] += sign * (vw + vw_nds)
        cell["acquiring"] += sign * acquiring
        cell["logistics"] += delivery
        cell["storage"] += storage
        cell["acceptance"] += acceptance
        cell["penalties"] += penalty
        cell["other_deductions"] += deduction
    funnel = {
        (cabinet, day, nm): values
        for cabinet, day, nm, *values in rows(
            conn,
            "SELECT cabinet_id, day, nm_id, open_count, cart_count, add_to_cart_conversion, cart_to_order_conversion, "
            "buyout_percent FROM rnp_funnel_stats",
        )
    }
    stock: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0])
    for cabinet, day, nm, quantity, to_client, from_client in rows(
        conn, "SELECT cabinet_id, day, nm_id, quantity, in_way_to_client, in_way_from_client FROM stocks"
    ):
        acc = stock[(cabinet, day, nm)]
        acc[0] += quantity or 0
        acc[1] += to_client or 0
        acc[2] += from_client or 0
    for key in (set(funnel) | set(stock)) - cells.keys():  # a funnel or stock row alone makes a mart row
        cells[key] = dict.fromkeys(ADDITIVE, ZERO)
    out = {}
    for key, cell in cells.items():
        has_ads = key in ad_keys
        opens, carts, to_cart, to_order, buyout = funnel.get(key, (None,) * 5)
        quantity, to_client, from_client = stock.get(key, (None, None, None))
        out[key] = {
            **cell,
            "avg_order_price": ratio(cell["orders_sum"], cell["orders_count"], 1),
            "avg_spp_percent": ratio(sum(spp[key], ZERO), Decimal(len(spp[key])), 1) if spp.get(key) else None,
            "ad_ctr_percent": ratio(cell["ad_clicks"], cell["ad_views"]) if has_ads else None,
            "ad_cpc": ratio(cell["ad_spend"], cell["ad_clicks"], 1) if has_ads else None,
            "ad_cpm": ratio(cell["ad_spend"], cell["ad_views"], 1000) if has_ads else None,
            "drr_of_orders_sum_percent": ratio(cell["ad_spend"], cell["orders_sum"]),
            "drr_of_ad_orders_sum_percent": ratio(cell["ad_spend"], cell["ad_orders_sum"]) if has_ads else None,
            "card_opens": opens,
            "add_to_cart": carts,
            "add_to_cart_conversion_percent": to_cart,
            "cart_to_order_conversion_percent": to_order,
            "funnel_buyout_percent": buyout,
            "stock_qty": quantity,
            "stock_in_way_to_client": to_client,
            "stock_in_way_from_client": from_client,
        }
    return out


def actual_mart(conn) -> dict[Key, dict[str, Any]]:
    cur = conn.execute(f"SELECT cabinet_id, day, nm_id, {', '.join(COLUMNS)} FROM rnp_daily")
    return {(c, d, nm): dict(zip(COLUMNS, values, strict=True)) for c, d, nm, *values in cur.fetchall()}


def compare(expected: dict[Key, dict[str, Any]], actual: dict[Key, dict[str, Any]]) -> list[str]:
    out = []
    for key in sorted(set(expected) | set(actual)):
        cabinet, day, nm = key
        where = f"cabinet {cabinet}, day {day}, product {nm}"
        if key not in actual:
            figures = {k: v for k, v in expected[key].items() if v}
            out.append(f"{where}: no rnp_daily row; the raw tables give {figures}")
            continue
        if key not in expected:
            out.append(f"{where}: rnp_daily has a row the raw tables do not give: {actual[key]}")
            continue
        for column in COLUMNS:
            want, got = expected[key][column], actual[key][column]
            if want != got:
                out.append(f"{where}, {column}: rnp_daily has {got}, the raw tables give {want}")
    return out
