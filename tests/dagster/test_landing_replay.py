"""The raw landing and the replay, against the WB simulator: live syncs land every answer they decode;
``optima-pipelines replay`` rebuilds a cabinet's tables from the landing, row for row equal to what
the live syncs wrote, without one request to WB; bad landed files are refused by name; a landing
that cannot write fails the page before anything is merged; no token is ever landed."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg import sql

from optima_pipelines.landing.store import process_landing
from optima_pipelines.mart.recompute import TABLES, recompute_tables
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinets import get_token
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from tests.cli_runner import invoke_cli
from tests.wb_syncs import advance_until_changed, run_job, served, simulator
from wb_simulator import CabinetSpec

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

#: What the live syncs write from WB's answers, and the РНП they feed.
FEED_TABLES = (
    "wb_orders",
    "wb_sales",
    "wb_report_lines",
    "ad_campaigns",
    "ad_campaign_products",
    "ad_campaign_stats",
    "rnp_funnel_stats",
    "stocks",
    "products",
    "prices",
    "price_history",
)
#: Columns that say which load wrote a row and when, not what WB said (the РНП's updated_at: its recompute's).
BOOKKEEPING = {"loaded_at", "run_id", "synced_at"}
RNP_BOOKKEEPING = {"updated_at"}
SCHEDULED = {"optima/trigger": "schedule"}


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(CabinetSpec(id="c1", products=15, orders_per_day=90, history_days=25, campaigns=2))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def table_rows(conn: Any, table: str) -> list[tuple]:
    """The cabinet's rows of ``table`` without the bookkeeping columns, sorted."""
    columns = [
        name
        for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        if name not in BOOKKEEPING and not (table in TABLES and name in RNP_BOOKKEEPING)
    ]
    query = sql.SQL("SELECT {} FROM {} WHERE cabinet_id = 'c1'").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table)
    )
    return sorted(conn.execute(query).fetchall(), key=repr)


def snapshot(conn: Any) -> dict[str, list[tuple]]:
    return {t: table_rows(conn, t) for t in (*FEED_TABLES, *TABLES)}


def recompute_all(conn: Any, settings: Any) -> None:
    """The РНП of every day the feeds hold, as the re-aggregation sensor's runs make it."""
    days = {
        d
        for (d,) in conn.execute(
            "SELECT day FROM wb_orders WHERE cabinet_id = 'c1' UNION SELECT day FROM wb_sales WHERE cabinet_id = 'c1' "
            "UNION SELECT day FROM ad_campaign_stats WHERE cabinet_id = 'c1' "
            "UNION SELECT attributed_day FROM wb_report_lines WHERE cabinet_id = 'c1'"
        ).fetchall()
    }
    warehouse = Warehouse(database_url=settings.database_url, env=settings.env)
    recompute_tables(warehouse.connect, {key: [("c1", d) for d in sorted(days)] for key in TABLES})


def live_syncs(sim: Any, instance: Any) -> None:
    """A day of a cabinet's scheduled syncs: every feed, then three hours later the frequent ones again."""
    for job in (
        "digitization_increment",
        "finance_sync",
        "ads_sync",
        "funnel_sync",
        "inventory_sync",
        "catalog_full_sync",
    ):
        assert run_job(job, instance, "c1", tags=SCHEDULED).success, job
    advance_until_changed(sim, timedelta(hours=3), lambda: len(sim.truth.orders("c1")), len(sim.truth.orders("c1")))
    for job in ("digitization_increment", "inventory_sync", "catalog_prices_sync", "ads_sync"):
        assert run_job(job, instance, "c1", tags=SCHEDULED).success, job


def wipe(conn: Any) -> None:
    """The cabinet's feeds, РНП and sync state gone: what a rebuild starts from."""
    for table in (*TABLES, *FEED_TABLES, "sync_state"):
        conn.execute(sql.SQL("DELETE FROM {} WHERE cabinet_id = 'c1'").format(sql.Identifier(table)))


def replay_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`optima-pipelines replay` (in this process: tests/cli_runner.py)."""
    return invoke_cli("replay", *args)


def landed_files(settings: Any) -> list[Path]:
    return sorted(Path(settings.landing_url).rglob("*.parquet"))


def test_a_replay_rebuilds_the_cabinets_tables_without_asking_wb(wb, warehouse_conn, dagster_instance, settings):
    live_syncs(wb, dagster_instance)
    recompute_all(warehouse_conn, settings)
    live = snapshot(warehouse_conn)
    empty = [t for t, rows in live.items() if not rows]
    assert not empty, f"the live syncs wrote nothing to {empty}: the test proves nothing there"

    feeds = {p.parent.parent.name.removeprefix("feed=") for p in landed_files(settings)}
    assert {"orders", "sales", "finance", "ads", "funnel", "stocks", "catalog", "prices"} <= feeds

    wipe(warehouse_conn)
    assert table_rows(warehouse_conn, "wb_orders") == []
    asked = len(wb.journal.calls())
    today = today_moscow()
    result = replay_cli("--cabinet", "c1", "--feed", "all", "--from", (today - timedelta(days=1)).isoformat())
    assert result.returncode == 0, result.stderr

    assert len(wb.journal.calls()) == asked, "the replay sent requests to WB"
    rebuilt = snapshot(warehouse_conn)
    for table in live:
        assert rebuilt[table] == live[table], f"{table}: the replay's rows differ from the live syncs'"
    assert '"failed": 0' in result.stdout, result.stdout


def test_a_feeds_replay_after_a_parser_fix_changes_only_that_feed(wb, warehouse_conn, dagster_instance, settings):
    """A replay of one feed over a warehouse that has it: the same answers merge to the same rows
    (nothing changes), other feeds are untouched, and WB is not asked."""
    live_syncs(wb, dagster_instance)
    before = snapshot(warehouse_conn)
    warehouse_conn.execute("DELETE FROM wb_sales WHERE cabinet_id = 'c1'")
    asked = len(wb.journal.calls())
    result = replay_cli("--cabinet", "c1", "--feed", "sales", "--from", today_moscow().isoformat())
    assert result.returncode == 0, result.stderr
    assert len(wb.journal.calls()) == asked
    after = snapshot(warehouse_conn)
    assert after["wb_sales"] == before["wb_sales"]
    assert after["wb_orders"] == before["wb_orders"]
    # The resume sensor finds no pause the replay's end of answers left behind.
    paused = warehouse_conn.execute(
        "SELECT feed FROM sync_state WHERE cabinet_id = 'c1' AND resume_at IS NOT NULL"
    ).fetchall()
    assert paused == []


def test_a_corrupt_or_foreign_landed_file_is_refused_by_name(wb, warehouse_conn, dagster_instance, settings):
    assert run_job("digitization_increment", dagster_instance, "c1", tags=SCHEDULED).success
    orders = [p for p in landed_files(settings) if "feed=orders" in str(p)]
    assert orders
    wipe(warehouse_conn)

    # Another schema version: refused, naming the file, before anything is merged.
    foreign = orders[0].parent / "part-foreign.parquet"
    table = pq.read_table(orders[0])
    pq.write_table(table.replace_schema_metadata({b"optima_landing_version": b"99"}), foreign)
    result = replay_cli("--cabinet", "c1", "--feed", "orders", "--from", today_moscow().isoformat())
    assert result.returncode == 1
    assert f"error: landed file {foreign} has landing schema version 99" in result.stderr
    assert "Traceback" not in result.stderr
    assert table_rows(warehouse_conn, "wb_orders") == []

    # A corrupt file (cut short): the same.
    foreign.unlink()
    data = orders[0].read_bytes()
    orders[0].write_bytes(data[: len(data) // 2])
    result = replay_cli("--cabinet", "c1", "--feed", "orders", "--from", today_moscow().isoformat())
    assert result.returncode == 1
    assert f"error: landed file {orders[0]} is unreadable" in result.stderr
    assert table_rows(warehouse_conn, "wb_orders") == []


def test_a_landing_that_cannot_write_fails_the_page_before_its_merge(wb, warehouse_conn, dagster_instance, settings):
    spool = settings.landing_spool_dir
    spool.parent.mkdir(parents=True, exist_ok=True)
    spool.write_text("a file where the spool folder should be")  # mkdir fails: nothing can be landed
    result = run_job("digitization_increment", dagster_instance, "c1", tags=SCHEDULED)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert (
        "could not land WB's answer to GET statistics /api/v1/supplier/orders"
        in failure.event_specific_data.error.message
    )
    assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0


def test_no_token_is_landed(wb, warehouse_conn, dagster_instance, settings):
    for job in ("digitization_increment", "ads_sync", "catalog_prices_sync"):
        assert run_job(job, dagster_instance, "c1", tags=SCHEDULED).success
    secret = get_token(warehouse_conn, TokenCipher(load_key(settings)), "c1")
    pieces = [secret, *(p for p in secret.split(".") if len(p) >= 16)]
    files = landed_files(settings)
    assert files
    for path in files:
        raw = path.read_bytes()
        values: list[Any] = []
        for column in pq.read_table(path).columns:
            if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
                values += [v for v in column.to_pylist() if v is not None]
        text = b"\n".join(v.encode() if isinstance(v, str) else v for v in values) + raw
        for piece in pieces:
            assert piece.encode() not in text, f"{path} holds the token"
    assert process_landing() is not None


def test_the_checks_compare_the_mart_with_what_wb_last_said(wb, warehouse_conn, dagster_instance, settings):
    """The landing's last word on a day's ad spend and payout equals the feeds after live syncs; a row
    lost from ad_campaign_stats (mart recomputed from the feed: equal to it) fails the ad-spend check
    against WB's last word only."""
    from optima_pipelines.landing.totals import last_said
    from optima_pipelines.mart.checks import compare_with_feeds
    from tests.rnp_feeds import run_range

    for job in ("digitization_increment", "finance_sync", "ads_sync"):
        assert run_job(job, dagster_instance, "c1", tags=SCHEDULED).success, job
    recompute_all(warehouse_conn, settings)
    spent = warehouse_conn.execute(
        "SELECT day FROM ad_campaign_stats WHERE cabinet_id = 'c1' GROUP BY day HAVING sum(sum) > 0 ORDER BY day DESC LIMIT 1"
    ).fetchone()[0]
    paid = warehouse_conn.execute(
        "SELECT attributed_day FROM wb_report_lines WHERE cabinet_id = 'c1' GROUP BY 1 HAVING sum(for_pay) > 0 "
        "ORDER BY 1 DESC LIMIT 1"
    ).fetchone()[0]
    pairs = [("c1", spent), ("c1", paid)]
    said = last_said(process_landing(), warehouse_conn, pairs)
    feeds = {(r[0], r[1]): r for r in compare_with_feeds(warehouse_conn, pairs)}
    assert said[("c1", spent)].ad_spend == feeds[("c1", spent)][8] > 0
    assert said[("c1", paid)].payout == feeds[("c1", paid)][10] != 0

    # Rows lost behind WB's back: the feed and the mart agree, WB's last word does not.
    warehouse_conn.execute(
        "DELETE FROM ad_campaign_stats WHERE ctid = (SELECT ctid FROM ad_campaign_stats WHERE cabinet_id = 'c1' "
        "AND day = %s AND sum > 0 LIMIT 1)",
        (spent,),
    )
    recompute_all(warehouse_conn, settings)
    result = run_range(dagster_instance, f"c1|{spent}", f"c1|{spent}", job="rnp_daily_check")
    checks = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    assert checks["orders_match_wb_orders"].passed
    ad = checks["ad_spend_matches_ad_campaign_stats"]
    assert not ad.passed
    assert f"WB last said {said[('c1', spent)].ad_spend}" in ad.description
    assert ad.metadata["ad_spend_wb_last_said"].value == str(said[("c1", spent)].ad_spend)


def test_the_replay_job_rebuilds_a_partitions_feeds_and_records_their_days(
    wb, warehouse_conn, dagster_instance, settings
):
    """The UI's way: the landing_replay job over a cabinet × day partition, no WB request; the days it
    changed are the feeds' materializations the re-aggregation sensor reads."""
    from tests.rnp_feeds import rnp_job
    from tests.wb_syncs import materializations

    assert run_job("digitization_increment", dagster_instance, "c1", tags=SCHEDULED).success
    live = table_rows(warehouse_conn, "wb_orders")
    wipe(warehouse_conn)
    asked = len(wb.journal.calls())
    today = today_moscow()
    result = rnp_job("landing_replay").execute_in_process(
        instance=dagster_instance,
        partition_key=f"c1|{today}",
        run_config={"ops": {"replay_landing": {"config": {"feeds": ["orders"]}}}},
    )
    assert result.success
    assert len(wb.journal.calls()) == asked
    assert table_rows(warehouse_conn, "wb_orders") == live
    assert table_rows(warehouse_conn, "wb_sales") == []  # not replayed
    days = {r[live_day_index(warehouse_conn)] for r in live}
    recorded = materializations(dagster_instance, "wb_orders", 0)
    replayed = {k for k, meta in recorded.items() if meta["trigger"] == "manual"}
    assert {f"c1|{d}" for d in days} <= replayed


def live_day_index(conn: Any) -> int:
    columns = [
        name
        for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'wb_orders' ORDER BY ordinal_position"
        ).fetchall()
        if name not in BOOKKEEPING
    ]
    return columns.index("day")
