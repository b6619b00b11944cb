"""WB revises the past (issue 38): from WB's raw answer to the ``rnp_daily`` cell.

Each test makes WB's answers by hand (the simulator serves them over real HTTP: a cabinet with no
orders of its own, hand-made orders, sales and ad days), runs the real sync job, then the real
re-aggregation sensor with its runs, and reads the mart. The expected figures are worked out here
by hand from the rows the test made.

- an ad day WB revises with a row fewer: the rows it no longer holds leave ``ad_campaign_stats``
  (before: spend 140 instead of 120, and a phantom ad order);
- an order WB re-dates a day earlier: it leaves its old day (before: counted on both days, and no
  re-aggregation ever asked for the old one);
- a sale WB re-dates a day earlier: its buyout is on the new day only.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest
from dagster import build_sensor_context

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.mart.checks import CHECK_METRICS, compare_with_feeds, evaluate_checks
from optima_pipelines.mart.recompute import TABLES, recompute_tables
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.rnp import rnp_reaggregate_sensor
from optima_pipelines.timeutil import today_moscow
from tests.rnp_feeds import execute_request, rnp_rows
from tests.wb_syncs import materializations, run_job, served, simulator
from wb_simulator import CabinetSpec

CABINET = "r1"


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    # No orders of its own (every row of these tests is hand-made), one campaign WB serves statistics for.
    sim = simulator(CabinetSpec(id=CABINET, products=2, orders_per_day=0, history_days=10, campaigns=1))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


class Reaggregation:
    """The real re-aggregation sensor, its runs executed as the daemon would, cursor kept between ticks."""

    def __init__(self, instance):
        self.instance = instance
        self.cursor: str | None = None

    def __call__(self) -> None:
        with build_sensor_context(instance=self.instance, cursor=self.cursor, resources=RESOURCES) as context:
            result = rnp_reaggregate_sensor(context)
        for request in getattr(result, "run_requests", None) or []:
            execute_request(self.instance, request)
        self.cursor = getattr(result, "cursor", None) or self.cursor

    def after_increment(self) -> None:
        """The cabinet's digitization increment (what WB answers now), then a tick of the sensor."""
        assert run_job("digitization_increment", self.instance, CABINET).success
        self()


def cell(conn, day: date, nm_id: int, *columns: str) -> tuple:
    """The columns of rnp_daily's row (cabinet, day, product); zeros when the row is not there."""
    row = rnp_rows(conn, "rnp_daily", CABINET, day).get(nm_id)
    return tuple(row[c] if row else 0 for c in columns)


def at(day: date, hour: int) -> datetime:
    return datetime.combine(day, time(hour))


def test_an_ad_day_revised_with_a_row_fewer_loses_that_row(wb, warehouse_conn, dagster_instance, settings):
    reaggregate = Reaggregation(dagster_instance)
    advert = wb.cabinets[CABINET].campaigns[0].advert_id
    day = today_moscow() - timedelta(days=1)  # in the ad sync's 3-day window
    wb.set_ad_day(
        CABINET,
        advert,
        day,
        [
            {"appType": 1, "nmId": 1701, "views": 1000, "clicks": 10, "sum": "100"},
            {"appType": 64, "nmId": 1701, "views": 200, "clicks": 2, "orders": 1, "sum": "20", "sum_price": "700"},
        ],
    )
    assert run_job("ads_sync", dagster_instance, CABINET).success
    reaggregate()
    columns = ("ad_spend", "ad_orders", "ad_orders_sum", "ad_views")
    assert cell(warehouse_conn, day, 1701, *columns) == (120, 1, 700, 1200)  # 100 + 20; the iOS order

    # The next cycle, the day still in the window, WB answers the site's row alone: 120, no order.
    wb.set_ad_day(CABINET, advert, day, [{"appType": 1, "nmId": 1701, "views": 1200, "clicks": 12, "sum": "120"}])
    assert run_job("ads_sync", dagster_instance, CABINET).success
    reaggregate()
    assert cell(warehouse_conn, day, 1701, *columns) == (Decimal("120.00"), 0, 0, 1200)  # not 140, no phantom order
    assert warehouse_conn.execute(
        "SELECT app_type, sum FROM ad_campaign_stats WHERE cabinet_id = %s AND day = %s AND nm_id = 1701",
        (CABINET, day),
    ).fetchall() == [(1, Decimal("120"))]
    # The day counts as changed, with the row removed; what WB last said is there for a check to read.
    assert materializations(dagster_instance, "ad_campaign_stats")[f"{CABINET}|{day}"]["rows_deleted"] == 1
    assert warehouse_conn.execute(
        "SELECT rows, spend, orders FROM ad_stats_answers WHERE cabinet_id = %s AND advert_id = %s AND day = %s",
        (CABINET, advert, day),
    ).fetchone() == (1, Decimal("120"), 0)
    # How a check of the mart's ad spend against what WB last said reads it: per (cabinet, day).
    said = warehouse_conn.execute(
        "SELECT sum(spend) FROM ad_stats_answers WHERE cabinet_id = %s AND day = %s", (CABINET, day)
    ).fetchone()
    mart = sum(r["ad_spend"] for r in rnp_rows(warehouse_conn, "rnp_daily", CABINET, day).values())
    assert said == (mart,) == (Decimal("120"),)

    # The check would have caught the old load, which only upserted: the dropped row back in the table
    # and the mart recomputed from it (140), the ad-spend check compares with WB's last answer (120).
    warehouse_conn.execute(
        "CREATE TEMP TABLE kept AS SELECT * FROM ad_campaign_stats WHERE cabinet_id = %s AND day = %s AND nm_id = 1701",
        (CABINET, day),
    )
    warehouse_conn.execute("UPDATE kept SET app_type = 64, sum = 20")
    warehouse_conn.execute("INSERT INTO ad_campaign_stats SELECT * FROM kept")
    recompute_tables(
        Warehouse(database_url=settings.database_url, env=settings.env).connect, {t: [(CABINET, day)] for t in TABLES}
    )
    assert cell(warehouse_conn, day, 1701, "ad_spend") == (Decimal("140.00"),)
    outcome = {
        o.check_name: o
        for o in evaluate_checks(compare_with_feeds(warehouse_conn, [(CABINET, day)]), sorted(CHECK_METRICS))
    }["ad_spend_matches_ad_campaign_stats"]
    assert not outcome.passed and not outcome.stale, outcome
    assert "rnp_daily has 140" in outcome.description and "has 120" in outcome.description, outcome.description


def test_an_order_re_dated_a_day_earlier_leaves_its_old_day(wb, warehouse_conn, dagster_instance):
    reaggregate = Reaggregation(dagster_instance)
    nm = wb.cabinets[CABINET].products[0].nm_id
    old = today_moscow() - timedelta(days=2)
    new = old - timedelta(days=1)
    wb.place_order(CABINET, nm, at(old, 10), 100)
    moved = wb.place_order(CABINET, nm, at(old, 11), 700)
    reaggregate.after_increment()
    assert cell(warehouse_conn, old, nm, "orders_count", "orders_sum") == (2, 800)

    # WB sends the same srid again, dated a day earlier, with a newer lastChangeDate.
    wb.redate_order(CABINET, moved, at(new, 11))
    reaggregate.after_increment()
    assert cell(warehouse_conn, old, nm, "orders_count", "orders_sum") == (1, Decimal("100.00"))
    assert cell(warehouse_conn, new, nm, "orders_count", "orders_sum") == (1, Decimal("700.00"))
    # The day the order left is reported as changed: the re-aggregation asked for it.
    assert materializations(dagster_instance, "wb_orders")[f"{CABINET}|{old}"]["rows_left"] == 1


def test_a_sale_re_dated_a_day_earlier_is_a_buyout_of_its_new_day_only(wb, warehouse_conn, dagster_instance):
    reaggregate = Reaggregation(dagster_instance)
    nm = wb.cabinets[CABINET].products[1].nm_id
    ordered, sold = today_moscow() - timedelta(days=4), today_moscow() - timedelta(days=2)
    earlier = sold - timedelta(days=1)
    srid = wb.place_order(CABINET, nm, at(ordered, 9), 700, sale_at=at(sold, 12))
    reaggregate.after_increment()
    assert cell(warehouse_conn, sold, nm, "buyouts_count", "buyouts_sum") == (1, 700)

    wb.redate_sale(CABINET, srid, at(earlier, 12))
    reaggregate.after_increment()
    assert cell(warehouse_conn, sold, nm, "buyouts_count", "buyouts_sum") == (0, 0)
    assert cell(warehouse_conn, earlier, nm, "buyouts_count", "buyouts_sum") == (1, Decimal("700.00"))
    assert materializations(dagster_instance, "wb_sales")[f"{CABINET}|{sold}"]["rows_left"] == 1
