"""Benchmark: the 60-s bid-engine sensor and the 12-s slot-booking monitor for many cabinets, vs one run per cabinet per tick.

    python bench/engines_cadence.py [--quick] [--cabinets 50] [--minutes 60]

A scratch environment with ``--cabinets`` cabinets served by the WB simulator over HTTP, each with
one autobidder rule (default settings: a change at most once an hour) on a campaign the real ads
sync loaded, and one open booking task whose slots stay closed. Then a simulated ``--minutes``:

- the bid engine: every simulated minute the real sensor is evaluated against the real Dagster
  instance; every run it requests is carried out (``apply_bids`` against the simulator: WB's
  minimum bids, one PATCH); every 5 minutes the ads sync brings new statistics (the latest day's
  figures move by a few percent); the clock is simulated by moving the stored times back;
- the booking monitor: the real sensor every 12 simulated seconds, each tick one coefficients poll
  over HTTP for all tasks and no run.

Measured: runs launched per hour and the CPU time of the sensor ticks (this thread's CPU, so the
simulator's server threads are not counted), scaled to an hour. Baseline: one queued run per cabinet
per tick, each costing at least the CPU of a run worker's start (a fresh interpreter importing the
code location, measured here: DESIGN.md §4.13/§4.18), before any work.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "bid-engine and booking sensors: runs per hour and tick CPU, vs a run per cabinet per tick"
OPTIONS = [
    Option("cabinets", 50, 8, "cabinets, each with one autobidder rule and one open booking task"),
    Option("minutes", 60, 10, "simulated minutes"),
]


def worker_start_cpu(samples: int) -> float:
    """CPU seconds of a fresh interpreter importing the code location (a queued run's start, before work)."""
    values = []
    for _ in range(samples):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-W", "ignore", "-c", "import optima_pipelines.definitions"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        values.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(values)


def setup_cabinets(sim, conn, ids: list[str]) -> None:  # type: ignore[no-untyped-def]
    from optima_pipelines.settings import load_settings
    from optima_pipelines.warehouse.cabinets import add_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key

    cipher = TokenCipher(load_key(load_settings()))
    for cabinet in ids:
        add_cabinet(conn, cipher, cabinet, cabinet.upper(), sim.token(cabinet))


def load_ads(ids: list[str]) -> None:
    import os

    from optima_pipelines.resources.warehouse import Warehouse
    from optima_pipelines.resources.wb import WbApi
    from optima_pipelines.sync import ads
    from optima_pipelines.sync.runs import SyncInput

    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    for cabinet in ids:
        with WbApi(warehouse=warehouse).client(cabinet, max_wait_seconds=30) as client:
            inp = SyncInput(
                connect=warehouse.connect, client=lambda: client, cabinet_id=cabinet, run_id=None, trigger="scheduled"
            )
            ads.sync_ads(inp, state_feed=None)


def add_rules_and_tasks(conn, rng: random.Random, warehouse_ids: list[int], today) -> int:  # type: ignore[no-untyped-def]
    """One rule per cabinet on its most-ordered advertised product (target CPO ±40 % of today's), one task."""
    rows = conn.execute(
        "SELECT DISTINCT ON (s.cabinet_id) s.cabinet_id, s.advert_id, s.nm_id, sum(s.sum) / nullif(sum(s.orders), 0),"
        " p.bid_search_kopecks FROM ad_campaign_stats s JOIN ad_campaign_products p USING (cabinet_id, advert_id, nm_id)"
        " JOIN ad_campaigns c USING (cabinet_id, advert_id) WHERE c.status = 9"
        " GROUP BY 1, 2, 3, 5 ORDER BY s.cabinet_id, sum(s.orders) DESC"
    ).fetchall()
    for cabinet, advert, nm, cpo, bid in rows:
        target = float(cpo or 50) * rng.choice([0.6, 0.8, 1.0, 1.25, 1.6])
        conn.execute(
            "INSERT INTO autobidder_rules (cabinet_id, advert_id, nm_id, placement, strategy, target, min_bid_kopecks,"
            " max_bid_kopecks) VALUES (%s, %s, %s, 'search', 'target_cpo', %s, 100, %s)",
            (cabinet, advert, nm, round(target, 2), bid * 3),
        )
        conn.execute(
            "INSERT INTO booking_tasks (cabinet_id, warehouse_ids, date_from, date_to, max_coefficient)"
            " VALUES (%s, %s, %s, %s, 0)",
            (cabinet, rng.sample(warehouse_ids, 2), today + timedelta(days=1), today + timedelta(days=10)),
        )
    return len(rows)


def ads_sync_moves_the_figures(conn) -> None:  # type: ignore[no-untyped-def]
    """What the 5-minute ads sync brings: the latest day's figures of each rule's product move a little."""
    conn.execute(
        "UPDATE ad_campaign_stats s SET views = views + 1 + floor(random() * 20)::int,"
        " sum = round(sum * (0.97 + random() * 0.1)::numeric, 2), orders = orders + floor(random() * 2)::int, loaded_at = now()"
        " FROM autobidder_rules r WHERE (s.cabinet_id, s.advert_id, s.nm_id) = (r.cabinet_id, r.advert_id, r.nm_id)"
        " AND s.day = (SELECT max(day) FROM ad_campaign_stats x WHERE x.cabinet_id = s.cabinet_id)"
    )


def minute_passes(conn) -> None:  # type: ignore[no-untyped-def]
    """Simulated time: every stored time of the engine moves one minute into the past."""
    conn.execute(
        "UPDATE autobidder_state SET set_at = set_at - interval '1 minute',"
        " stats_loaded_at = stats_loaded_at - interval '1 minute', decided_at = decided_at - interval '1 minute',"
        " wb_min_checked_at = wb_min_checked_at - interval '1 minute'"
    )
    conn.execute("UPDATE ad_campaign_stats SET loaded_at = loaded_at - interval '1 minute'")
    conn.execute("UPDATE ad_campaign_products SET synced_at = synced_at - interval '1 minute'")


def run(bench: Bench, opts: argparse.Namespace) -> None:
    from dagster import build_sensor_context

    from optima_pipelines.definitions import RESOURCES
    from optima_pipelines.engines import autobidder
    from optima_pipelines.resources.warehouse import Warehouse
    from optima_pipelines.resources.wb import WbApi
    from optima_pipelines.sensors.autobidder import autobidder_bid_engine_sensor
    from optima_pipelines.sensors.booking import booking_slot_monitor
    from optima_pipelines.timeutil import today_moscow
    from tests.wb_syncs import TIME_SCALE, simulator
    from wb_simulator import CabinetSpec, serve
    from wb_simulator.catalogs import WAREHOUSES

    n, minutes = opts.cabinets, opts.minutes
    ids = [f"e{i:03d}" for i in range(n)]
    sim = simulator(
        *[CabinetSpec(id=c, products=5, orders_per_day=200, history_days=6, campaigns=2) for c in ids], seed=9
    )
    warehouse_ids = [w for w, _ in WAREHOUSES[:6]]
    today = today_moscow()
    for wh in warehouse_ids:
        for d in range(14):
            sim.open_slot(wh, today + timedelta(days=d), coefficient=-1)
    rng = random.Random(4)
    with (
        serve(sim) as base_url,
        bench.environment("engbench", OPTIMA_WB_BASE_URL=base_url, OPTIMA_WB_TIME_SCALE=str(TIME_SCALE)) as env,
    ):
        instance = env.instance()
        with env.connect() as conn:
            setup_cabinets(sim, conn, ids)
        harness.say(f"  loading the ads of {n} cabinets through the real sync...")
        load_ads(ids)
        with env.connect() as conn:
            rules = add_rules_and_tasks(conn, rng, warehouse_ids, today)
        harness.say(f"  {rules} rules, {rules} open booking tasks; simulating {minutes} min")

        warehouse = Warehouse(database_url=env.database_url)
        wb = WbApi(warehouse=warehouse)
        bid_cpu = bid_wall = 0.0
        bid_runs = run_cpu = 0.0
        slot_cpu = slot_wall = 0.0
        slot_ticks = 0
        for minute in range(minutes):
            if minute % 5 == 0:
                with env.connect() as conn:
                    ads_sync_moves_the_figures(conn)
            wall, cpu = time.perf_counter(), time.thread_time()
            with build_sensor_context(instance=instance, resources=RESOURCES) as context:
                result = autobidder_bid_engine_sensor(context)
            bid_cpu += time.thread_time() - cpu
            bid_wall += time.perf_counter() - wall
            for request in getattr(result, "run_requests", None) or []:
                # One sweep over the cabinets with a bid to change: its work, cabinet by cabinet.
                config = request.run_config["ops"]["autobidder_bid_engine_sweep_op"]["config"]
                cpu = time.thread_time()
                for cabinet in config["cabinet_ids"]:
                    with wb.client(cabinet) as client:
                        autobidder.apply_bids(warehouse.connect, client, cabinet, run_id=None)
                run_cpu += time.thread_time() - cpu
                bid_runs += 1
            for _ in range(5):  # the 12-s monitor: five ticks a minute
                wall, cpu = time.perf_counter(), time.thread_time()
                with build_sensor_context(instance=instance, resources=RESOURCES) as context:
                    booking_slot_monitor(context)
                slot_cpu += time.thread_time() - cpu
                slot_wall += time.perf_counter() - wall
                slot_ticks += 1
            with env.connect() as conn:
                minute_passes(conn)
        with env.connect() as conn:
            matched = conn.execute("SELECT count(*) FROM booking_matches").fetchone()[0]
            changes = dict(
                conn.execute(
                    "SELECT status, count(*) FROM engine_actions WHERE engine = 'autobidder' GROUP BY 1"
                ).fetchall()
            )
            errors = conn.execute("SELECT consecutive_errors FROM booking_monitor_state").fetchone()[0]
        if errors:
            raise RuntimeError(f"the coefficients poll failed {errors} times in a row")
        harness.say(f"  bid changes sent, by outcome: {changes}; booking matches: {matched} (slots kept closed)")

    start_cpu = worker_start_cpu(1 if bench.quick else 3)
    harness.say(f"  a run worker's start (fresh interpreter importing the code location): {start_cpu:.2f} CPU s")
    hour = 60 / minutes
    bid_ticks = minutes
    naive_bid_runs = n * 60
    naive_slot_runs = n * 300
    bench.figure(
        f"bid engine: runs launched per hour, {n} cabinets",
        bid_runs * hour,
        "runs",
        baseline_name="a run per cabinet per 60-s tick",
        baseline=naive_bid_runs,
        higher_is_better=False,
    )
    bench.figure(
        f"bid engine: sensor CPU per hour, {n} cabinets",
        bid_cpu * hour,
        "s",
        baseline_name="naive: run starts' CPU per hour",
        baseline=naive_bid_runs * start_cpu,
        higher_is_better=False,
        note=f"{bid_cpu / bid_ticks * 1000:.0f} ms CPU, {bid_wall / bid_ticks * 1000:.0f} ms wall per tick",
    )
    bench.figure(
        f"bid engine: sensor + runs CPU per hour, {n} cabinets",
        (bid_cpu + run_cpu + bid_runs * start_cpu) * hour,
        "s",
        baseline_name="naive: run starts' CPU per hour",
        baseline=naive_bid_runs * start_cpu,
        higher_is_better=False,
        note="ours includes each launched run's start and its work",
    )
    bench.figure(
        f"booking monitor: WB requests per hour, {n} cabinets",
        slot_ticks * hour,
        "requests",
        baseline_name="a run (and a request) per cabinet per 12-s tick",
        baseline=naive_slot_runs,
        higher_is_better=False,
        note=f"runs launched: 0 vs {naive_slot_runs} naive (the poll is in the sensor)",
    )
    bench.figure(
        f"booking monitor: sensor CPU per hour, {n} cabinets",
        slot_cpu * 300 / slot_ticks,
        "s",
        baseline_name="naive: run starts' CPU per hour",
        baseline=naive_slot_runs * start_cpu,
        higher_is_better=False,
        note=f"{slot_cpu / slot_ticks * 1000:.0f} ms CPU, {slot_wall / slot_ticks * 1000:.0f} ms wall per tick",
    )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
