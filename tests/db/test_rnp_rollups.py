"""The РНП rollups and merge, as SQL on real PostgreSQL, against hand-made feed rows with known totals."""

from __future__ import annotations

import threading
from decimal import Decimal

import psycopg
import pytest

from optima_pipelines.mart import recompute as rnp
from optima_pipelines.mart.recompute import TABLES, recompute_partitions, recompute_tables
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.warehouse.table_partitions import add_months, partition_name
from tests.rnp_feeds import (
    TODAY,
    add_ad_stat,
    add_funnel,
    add_order,
    add_report_line,
    add_sale,
    add_stock,
    days_ago,
    rnp_rows,
)

C = "c1"
D = days_ago(5)
PREV = days_ago(6)


@pytest.fixture
def warehouse(optima_env: str, database_url: str) -> Warehouse:
    return Warehouse(database_url=database_url, env=optima_env)


def recompute_all(warehouse: Warehouse, pairs) -> dict[str, object]:
    return {
        t: recompute_partitions(warehouse.connect, t, pairs)
        for t in ("rnp_sales", "rnp_ads", "rnp_finance", "rnp_daily")
    }


@pytest.fixture
def feeds(warehouse_conn):
    conn = warehouse_conn
    # Orders of D: product 101 three orders (one cancelled), 102 one order the day before.
    add_order(conn, C, "o1", D, 101, "500.00", spp="25")
    add_order(conn, C, "o2", D, 101, "300.50", spp="30", is_cancel=True)
    add_order(conn, C, "o3", D, 101, "199.99")
    add_order(conn, C, "o4", PREV, 102, "1000.00")
    add_order(conn, "other", "x1", D, 101, "77.77")  # another cabinet: never mixed in
    # Sales and returns of D; a return with WB's sign either way; one sale of the previous day.
    add_sale(conn, C, "S1", "o0", D, 101, "480.00")
    add_sale(conn, C, "S2", "o00", D, 101, "300.00")
    add_sale(conn, C, "R1", "o000", D, 101, "-250.00")
    add_sale(conn, C, "R2", "o0000", D, 103, "199.99")
    add_sale(conn, C, "S3", "o4", PREV, 102, "1000.00")
    # Finance: lines land on their source order's day, else their own.
    later = days_ago(2)
    add_report_line(conn, C, 1, later, 101, srid="o1", for_pay="376.99", retail_amount="399.68", vw="22.25",
                    vw_nds="4.45", acquiring_fee="14.89")  # fmt: skip
    add_report_line(conn, C, 2, later, 101, srid="o3", doc_type_name="Возврат", for_pay="150.10",
                    retail_amount="120.00", vw="10.00", vw_nds="2.00", acquiring_fee="5.00")  # fmt: skip
    add_report_line(conn, C, 3, later, 101, srid="o1", doc_type_name="", delivery_service="55.30")
    add_report_line(conn, C, 4, D, 0, paid_storage="12647.29")
    add_report_line(conn, C, 5, D, None, penalty="231.35")
    add_report_line(conn, C, 6, D, 102, srid="unknown-srid", for_pay="100.01")
    add_report_line(conn, C, 7, D, 102, srid="o4", for_pay="900.00")  # its order is of PREV
    add_report_line(conn, C, 8, D, 0, deduction="6354", paid_acceptance="865")
    # Ads of D: two apps of campaign 1 for 101, and a product associated with it.
    add_ad_stat(conn, C, 1, D, 101, app_type=1, views=1000, clicks=30, spend="150.50", atbs=5, orders=2,
                sum_price="1000.00")  # fmt: skip
    add_ad_stat(conn, C, 1, D, 101, app_type=32, views=500, clicks=20, spend="75.25")
    add_ad_stat(conn, C, 1, D, 555, views=100, clicks=1, spend="10.00", orders=1, sum_price="450.00",
                is_associated=True)  # fmt: skip
    # Funnel and stock of 101 on D.
    add_funnel(conn, C, D, 101, opens=2000, carts=150, add_to_cart_conversion="7.5", cart_to_order_conversion="2",
               buyout_percent="80")  # fmt: skip
    add_stock(conn, C, D, 101, 1, 1, 10)
    add_stock(conn, C, D, 101, 2, 1, 5)
    add_stock(conn, C, D, 101, 1, 2, 7)
    return conn


def test_sales_count_orders_on_their_day_and_sales_on_theirs(warehouse, feeds):
    stats = recompute_partitions(warehouse.connect, "rnp_sales", [(C, D)])
    rows = rnp_rows(feeds, "rnp_sales", C, D)
    assert (stats.rows, stats.rows_changed, stats.rows_dropped) == (2, 2, 0)
    p101 = rows[101]
    assert (p101["orders_count"], p101["orders_sum"]) == (3, Decimal("1000.49"))
    assert (p101["cancellations_count"], p101["cancellations_sum"]) == (1, Decimal("300.50"))
    assert (p101["buyouts_count"], p101["buyouts_sum"]) == (2, Decimal("780.00"))
    assert (p101["returns_count"], p101["returns_sum"]) == (1, Decimal("250.00"))
    assert p101["avg_order_price"] == Decimal("333.50")  # 1000.49 / 3
    assert p101["avg_spp_percent"] == Decimal("27.50")  # orders without SPP do not count
    p103 = rows[103]  # a return and no order: a row, with no average price
    assert (p103["orders_count"], p103["returns_count"], p103["returns_sum"]) == (0, 1, Decimal("199.99"))
    assert p103["avg_order_price"] is None
    assert 102 not in rows  # its order and sale are of the previous day


def test_finance_lines_go_to_their_source_orders_day_to_the_kopeck(warehouse, feeds):
    recompute_partitions(warehouse.connect, "rnp_finance", [(C, D), (C, PREV)])
    rows = rnp_rows(feeds, "rnp_finance", C, D)
    p101 = rows[101]
    assert p101["payout"] == Decimal("226.89")  # 376.99 - 150.10 (a return)
    assert p101["realization"] == Decimal("279.68")
    assert p101["commission"] == Decimal("14.70")  # 22.25 + 4.45 - (10.00 + 2.00)
    assert p101["acquiring"] == Decimal("9.89")
    assert p101["logistics"] == Decimal("55.30")
    assert p101["finance_lines"] == 3
    cabinet_level = rows[0]  # lines tied to no product (nm_id 0 or missing)
    assert cabinet_level["storage"] == Decimal("12647.29")
    assert cabinet_level["penalties"] == Decimal("231.35")
    assert cabinet_level["other_deductions"] == Decimal("6354")
    assert cabinet_level["acceptance"] == Decimal("865")
    assert rows[102]["payout"] == Decimal("100.01")  # unknown source order: its own day
    assert rnp_rows(feeds, "rnp_finance", C, PREV)[102]["payout"] == Decimal("900.00")
    assert sum(r["payout"] for r in rows.values()) == Decimal("326.90")


def test_ads_sum_every_campaign_app_and_associated_product(warehouse, feeds):
    recompute_partitions(warehouse.connect, "rnp_ads", [(C, D)])
    rows = rnp_rows(feeds, "rnp_ads", C, D)
    p101 = rows[101]
    assert (p101["ad_views"], p101["ad_clicks"], p101["ad_spend"]) == (1500, 50, Decimal("225.75"))
    assert (p101["ad_carts"], p101["ad_orders"], p101["ad_orders_sum"]) == (5, 2, Decimal("1000.00"))
    assert (p101["ad_ctr_percent"], p101["ad_cpc"], p101["ad_cpm"]) == (
        Decimal("3.33"),
        Decimal("4.52"),
        Decimal("150.50"),
    )
    associated = rows[555]
    assert (associated["ad_spend"], associated["ad_orders"], associated["ad_orders_sum"]) == (
        Decimal("10.00"),
        1,
        Decimal("450.00"),
    )
    assert sum(r["ad_spend"] for r in rows.values()) == Decimal("235.75")


def test_merge_puts_every_domain_side_by_side(warehouse, feeds):
    stats = recompute_all(warehouse, [(C, D)])
    rows = rnp_rows(feeds, "rnp_daily", C, D)
    assert stats["rnp_daily"].rows == len(rows) == 5  # 0, 101, 102, 103, 555
    p101 = rows[101]
    assert (p101["orders_count"], p101["orders_sum"], p101["ad_spend"], p101["payout"]) == (
        3,
        Decimal("1000.49"),
        Decimal("225.75"),
        Decimal("226.89"),
    )
    assert p101["drr_of_orders_sum_percent"] == Decimal("22.56")  # 100 * 225.75 / 1000.49
    assert p101["drr_of_ad_orders_sum_percent"] == Decimal("22.58")  # 100 * 225.75 / 1000.00
    assert (p101["card_opens"], p101["add_to_cart"], p101["add_to_cart_conversion_percent"]) == (
        2000,
        150,
        Decimal("7.5"),
    )
    assert p101["funnel_buyout_percent"] == Decimal("80")
    assert (p101["stock_qty"], p101["stock_in_way_to_client"], p101["stock_in_way_from_client"]) == (22, 3, 6)
    p555 = rows[555]  # an ad-only product: zero sales, no funnel or stock snapshot (unknown, not 0)
    assert (p555["orders_count"], p555["orders_sum"], p555["drr_of_orders_sum_percent"]) == (0, 0, None)
    assert (p555["card_opens"], p555["stock_qty"]) == (None, None)
    assert rows[0]["storage"] == Decimal("12647.29")


def test_recompute_is_idempotent_and_touches_only_changed_rows(warehouse, feeds):
    recompute_all(warehouse, [(C, D)])
    first = rnp_rows(feeds, "rnp_daily", C, D)
    again = recompute_all(warehouse, [(C, D)])
    assert all((s.rows_changed, s.rows_removed) == (0, 0) for s in again.values())
    assert rnp_rows(feeds, "rnp_daily", C, D) == first  # updated_at included: no row was rewritten

    # One order more for 101; the report lines and the associated product's ads vanish upstream.
    add_order(feeds, C, "o5", D, 101, "0.51")
    feeds.execute("DELETE FROM wb_report_lines WHERE cabinet_id = %s", (C,))
    feeds.execute("DELETE FROM ad_campaign_stats WHERE cabinet_id = %s AND nm_id = 555", (C,))
    stats = recompute_all(warehouse, [(C, D)])
    assert (stats["rnp_sales"].rows_changed, stats["rnp_sales"].rows_removed) == (1, 0)
    assert (stats["rnp_ads"].rows_changed, stats["rnp_ads"].rows_removed) == (0, 1)
    assert stats["rnp_finance"].rows_removed == 3  # 0, 101, 102
    rows = rnp_rows(feeds, "rnp_daily", C, D)
    assert 555 not in rows and 0 not in rows
    assert (rows[101]["orders_count"], rows[101]["orders_sum"], rows[101]["payout"]) == (4, Decimal("1001.00"), 0)
    assert rows[103] == first[103]  # untouched: same values, same updated_at


def test_days_without_a_table_partition_are_dropped_and_counted(warehouse, feeds):
    # The oldest month the test schema keeps (3 months of retention), its partition dropped by hand.
    old_month = add_months(TODAY.replace(day=1), -3)
    feeds.execute(f"DROP TABLE {partition_name('rnp_sales', old_month)}")
    add_order(feeds, C, "old-1", old_month, 101, "10.00")
    add_order(feeds, C, "old-2", old_month, 102, "20.00")
    stats = recompute_partitions(warehouse.connect, "rnp_sales", [(C, old_month), (C, D)])
    assert (stats.rows, stats.rows_dropped) == (2, 2)
    assert stats.days_outside_partitions == {old_month}
    assert stats.metadata()["batch_days_outside_table_partitions"] == [old_month.isoformat()]
    assert rnp_rows(feeds, "rnp_sales", C, D)[101]["orders_count"] == 3


def test_drr_of_orders_is_zero_for_a_product_with_orders_and_no_ads(warehouse, feeds):
    add_order(feeds, C, "o5", D, 104, "640.00")  # ordered, never advertised
    recompute_all(warehouse, [(C, D)])
    rows = rnp_rows(feeds, "rnp_daily", C, D)
    assert (rows[104]["orders_sum"], rows[104]["ad_spend"]) == (Decimal("640.00"), 0)
    assert rows[104]["drr_of_orders_sum_percent"] == 0  # no ad spend against 640 ₽ of orders: 0 %, known
    assert rows[104]["drr_of_ad_orders_sum_percent"] is None  # no orders from ads: no denominator
    assert rows[103]["drr_of_orders_sum_percent"] is None  # a return and no order: orders_sum is 0


# --- watermarks: unchanged pairs are skipped, and only those --------------------------------------


def test_a_range_again_with_nothing_changed_computes_and_writes_nothing(warehouse, feeds):
    first = recompute_all(warehouse, [(C, D), (C, PREV)])
    again = recompute_all(warehouse, [(C, D), (C, PREV)])
    assert all(s.unchanged == 0 and s.rows_changed > 0 for t, s in first.items() if t != "rnp_ads")
    assert all((s.unchanged, s.rows_changed, s.rows_removed) == (2, 0, 0) for s in again.values())
    # Forced, the same: nothing to write.
    forced = {t: recompute_partitions(warehouse.connect, t, [(C, D), (C, PREV)], force=True) for t in again}
    assert all((s.unchanged, s.rows_changed, s.rows_removed) == (0, 0, 0) for s in forced.values())


def test_a_feed_write_makes_its_pair_stale_and_only_its_pair(warehouse, feeds):
    recompute_all(warehouse, [(C, D), (C, PREV)])
    add_order(feeds, C, "o9", D, 101, "10.00")
    stats = recompute_partitions(warehouse.connect, "rnp_sales", [(C, D), (C, PREV)])
    assert (stats.unchanged, stats.rows_changed) == (1, 1)
    assert rnp_rows(feeds, "rnp_sales", C, D)[101]["orders_count"] == 4
    # The rollup's change makes rnp_daily of D stale, though the sensor asks only for the merge.
    daily = recompute_partitions(warehouse.connect, "rnp_daily", [(C, D), (C, PREV)])
    assert (daily.unchanged, daily.rows_changed) == (1, 1)
    assert rnp_rows(feeds, "rnp_daily", C, D)[101]["orders_count"] == 4


def test_an_order_arriving_after_its_report_line_makes_both_days_stale(warehouse, feeds):
    late_day, line_day = days_ago(9), days_ago(3)
    add_report_line(feeds, C, 50, line_day, 104, srid="late", for_pay="42.00")
    recompute_all(warehouse, [(C, late_day), (C, line_day)])
    assert rnp_rows(feeds, "rnp_finance", C, line_day)[104]["payout"] == Decimal("42.00")
    add_order(feeds, C, "late", late_day, 104, "50.00")  # the line moves to its order's day
    stats = recompute_partitions(warehouse.connect, "rnp_finance", [(C, late_day), (C, line_day)])
    assert stats.unchanged == 0
    assert 104 not in rnp_rows(feeds, "rnp_finance", C, line_day)
    assert rnp_rows(feeds, "rnp_finance", C, late_day)[104]["payout"] == Decimal("42.00")
    # A report line of a known order changed later: its order's day is stale, not only its own.
    feeds.execute("UPDATE wb_report_lines SET for_pay = 43 WHERE cabinet_id = %s AND rrd_id = 50", (C,))
    stats = recompute_partitions(warehouse.connect, "rnp_finance", [(C, late_day)])
    assert stats.unchanged == 0
    assert rnp_rows(feeds, "rnp_finance", C, late_day)[104]["payout"] == Decimal("43.00")


def test_a_write_to_the_mart_from_outside_the_recompute_is_repaired(warehouse, feeds):
    recompute_all(warehouse, [(C, D)])
    feeds.execute("UPDATE rnp_daily SET orders_sum = 0 WHERE cabinet_id = %s AND day = %s", (C, D))
    stats = recompute_partitions(warehouse.connect, "rnp_daily", [(C, D)])
    assert (stats.unchanged, stats.rows_changed) == (0, 1)  # the one product with orders that day
    assert rnp_rows(feeds, "rnp_daily", C, D)[101]["orders_sum"] == Decimal("1000.49")
    feeds.execute("TRUNCATE rnp_sales")
    assert recompute_partitions(warehouse.connect, "rnp_sales", [(C, D)]).rows_changed == 2


def test_a_cancellation_leaves_finance_alone_and_a_re_dated_order_moves_its_lines(warehouse, feeds):
    recompute_all(warehouse, [(C, D), (C, PREV), (C, days_ago(2))])
    feeds.execute("UPDATE wb_orders SET is_cancel = true WHERE cabinet_id = %s AND srid = 'o1'", (C,))
    assert recompute_partitions(warehouse.connect, "rnp_finance", [(C, D)]).unchanged == 1
    assert recompute_partitions(warehouse.connect, "rnp_sales", [(C, D)]).rows_changed == 1
    feeds.execute("UPDATE wb_orders SET day = %s WHERE cabinet_id = %s AND srid = 'o4'", (days_ago(2), C))
    stats = recompute_partitions(warehouse.connect, "rnp_finance", [(C, PREV), (C, days_ago(2))])
    assert stats.unchanged == 0
    assert 102 not in rnp_rows(feeds, "rnp_finance", C, PREV)
    assert rnp_rows(feeds, "rnp_finance", C, days_ago(2))[102]["payout"] == Decimal("900.00")


def test_amounts_with_more_than_two_decimals_are_summed_exactly(warehouse, warehouse_conn):
    # Money is summed as integer kopecks; WB documents no precision, so an amount with sub-kopeck
    # digits must still count exactly (it is summed apart, as numeric), beside kopeck ones.
    conn = warehouse_conn
    add_order(conn, C, "k1", D, 201, "100.005", spp="10.125")
    add_order(conn, C, "k2", D, 201, "0.001", is_cancel=True)
    add_order(conn, C, "k3", D, 201, "199.99", spp="20")
    add_sale(conn, C, "S9", "k1", D, 201, "100.005")
    add_sale(conn, C, "R9", "k3", D, 201, "-10.125")
    add_report_line(conn, C, 91, D, 201, srid="k1", for_pay="0.333", retail_amount="99.995", vw="1.115",
                    vw_nds="0.22", acquiring_fee="0.5")  # fmt: skip
    add_report_line(conn, C, 92, D, 201, srid="k3", for_pay="150.10", delivery_service="0.0001")
    add_ad_stat(conn, C, 7, D, 201, views=3, clicks=3, spend="0.005", sum_price="10.001")
    add_ad_stat(conn, C, 7, D, 201, app_type=32, views=1, clicks=0, spend="1.10")
    recompute_all(warehouse, [(C, D)])

    sales = rnp_rows(conn, "rnp_sales", C, D)[201]
    assert sales["orders_sum"] == Decimal("299.996")  # 100.005 + 0.001 + 199.99
    assert sales["cancellations_sum"] == Decimal("0.001")
    assert (sales["buyouts_sum"], sales["returns_sum"]) == (Decimal("100.005"), Decimal("10.125"))
    assert sales["avg_order_price"] == Decimal("100.00")  # 299.996 / 3 = 99.998(6)
    assert sales["avg_spp_percent"] == Decimal("15.06")  # (10.125 + 20) / 2 = 15.0625
    finance = rnp_rows(conn, "rnp_finance", C, D)[201]
    assert finance["payout"] == Decimal("150.433")
    assert finance["realization"] == Decimal("99.995")
    assert finance["commission"] == Decimal("1.335")
    assert finance["acquiring"] == Decimal("0.50")
    assert finance["logistics"] == Decimal("0.0001")
    ads = rnp_rows(conn, "rnp_ads", C, D)[201]
    assert (ads["ad_spend"], ads["ad_orders_sum"]) == (Decimal("1.105"), Decimal("10.001"))
    assert ads["ad_cpc"] == Decimal("0.37")  # 1.105 / 3 = 0.368(3)
    daily = rnp_rows(conn, "rnp_daily", C, D)[201]
    assert (daily["orders_sum"], daily["payout"], daily["ad_spend"]) == (
        Decimal("299.996"),
        Decimal("150.433"),
        Decimal("1.105"),
    )


def test_averages_and_ratios_round_half_a_kopeck_away_from_zero(warehouse, warehouse_conn):
    conn = warehouse_conn
    add_order(conn, C, "h1", D, 301, "0.01", spp="10.01")
    add_order(conn, C, "h2", D, 301, "0.02", spp="10.02")
    add_order(conn, C, "h3", D, 302, "-0.01")
    add_order(conn, C, "h4", D, 302, "-0.02")
    add_ad_stat(conn, C, 8, D, 301, views=800, clicks=2, spend="0.05", sum_price="0.06")
    recompute_all(warehouse, [(C, D)])

    sales = rnp_rows(conn, "rnp_sales", C, D)
    assert sales[301]["avg_order_price"] == Decimal("0.02")  # 0.015
    assert sales[302]["avg_order_price"] == Decimal("-0.02")  # -0.015: away from zero
    assert sales[301]["avg_spp_percent"] == Decimal("10.02")  # 10.015
    ads = rnp_rows(conn, "rnp_ads", C, D)[301]
    assert ads["ad_cpc"] == Decimal("0.03")  # 0.05 / 2 = 0.025
    assert ads["ad_ctr_percent"] == Decimal("0.25")  # 100 * 2 / 800
    assert ads["ad_cpm"] == Decimal("0.06")  # 1000 * 0.05 / 800 = 0.0625
    daily = rnp_rows(conn, "rnp_daily", C, D)[301]
    assert daily["drr_of_orders_sum_percent"] == Decimal("166.67")  # 100 * 0.05 / 0.03 = 166.66(6)
    assert daily["drr_of_ad_orders_sum_percent"] == Decimal("83.33")  # 100 * 0.05 / 0.06 = 83.33(3)


# --- the four tables together, transactions at once ------------------------------------------------


def table_rows(conn, table: str) -> list[tuple]:
    columns = rnp.value_columns(conn, table)
    return conn.execute(
        f"SELECT cabinet_id, day, nm_id, {', '.join(columns)} FROM {table} ORDER BY cabinet_id, day, nm_id"
    ).fetchall()


def test_the_four_tables_in_parallel_transactions_equal_them_table_by_table(warehouse, feeds, monkeypatch):
    pairs = [(C, days_ago(n)) for n in range(2, 10)]
    assert rnp.RECOMPUTE_CONNECTIONS == 2
    together = recompute_tables(warehouse.connect, dict.fromkeys(TABLES, pairs))
    assert {t: s.partitions for t, s in together.items()} == dict.fromkeys(TABLES, len(pairs))
    parallel = {t: table_rows(feeds, t) for t in TABLES}
    assert all(parallel.values())
    feeds.execute("TRUNCATE rnp_sales, rnp_ads, rnp_finance, rnp_daily")
    monkeypatch.setattr(rnp, "RECOMPUTE_CONNECTIONS", 1)
    one_by_one = {t: recompute_partitions(warehouse.connect, t, pairs) for t in TABLES}
    assert {t: table_rows(feeds, t) for t in TABLES} == parallel
    assert {t: s.rows for t, s in one_by_one.items()} == {t: s.rows for t, s in together.items()}


def test_a_failure_in_one_rollup_leaves_nothing_of_its_days_written(warehouse, feeds):
    # rnp_finance refuses D's rows: D's transaction fails, with its rnp_sales, rnp_ads and rnp_daily rows.
    feeds.execute(f"ALTER TABLE rnp_finance ADD CONSTRAINT not_d CHECK (day <> '{D.isoformat()}') NOT VALID")
    both = [(C, D), (C, PREV)]
    with pytest.raises(psycopg.errors.CheckViolation):
        recompute_tables(warehouse.connect, dict.fromkeys(TABLES, both))
    assert all(not rnp_rows(feeds, t, C, D) for t in TABLES)
    # PREV's transaction ran beside it and committed all four tables of its day.
    assert all(rnp_rows(feeds, t, C, PREV) for t in ("rnp_sales", "rnp_finance", "rnp_daily"))
    feeds.execute("ALTER TABLE rnp_finance DROP CONSTRAINT not_d")
    again = recompute_tables(warehouse.connect, dict.fromkeys(TABLES, both))
    assert all(s.unchanged == 1 for s in again.values())  # PREV is fresh; D is recomputed
    assert rnp_rows(feeds, "rnp_daily", C, D)[101]["orders_sum"] == Decimal("1000.49")


def test_two_recomputes_of_the_same_days_at_once_write_them_once(warehouse, feeds):
    # The sensor's run and the nightly merge over the same days: the second waits for the first's
    # transactions (a lock per (cabinet, day)), then finds the days fresh; neither fails on a key,
    # and every row is written once (by either: their transactions over different days interleave).
    pairs = [(C, days_ago(n)) for n in range(2, 8)]
    results: list[dict] = []
    runs = [
        threading.Thread(
            target=lambda: results.append(recompute_tables(warehouse.connect, dict.fromkeys(TABLES, pairs)))
        )
        for _ in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert len(results) == 2
    written = {t: results[0][t].rows_changed + results[1][t].rows_changed for t in TABLES}
    assert written == {t: len(table_rows(feeds, t)) for t in TABLES}
    assert all(r[t].rows_removed == 0 and r[t].partitions == len(pairs) for r in results for t in TABLES)
