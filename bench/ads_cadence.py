"""What WB's fullstats limit (1 request per 20 s, ≤ 50 campaigns each) means for the 5-minute ads cadence.

    python bench/ads_cadence.py [--server-url postgresql://postgres@127.0.0.1:5432/postgres] [--scale 20]

For cabinets with more and more campaigns, runs the real ads sync (sync/ads.py) against the WB
simulator over HTTP, with WB's limits on a clock ``--scale`` times faster (the simulator's and the
client's), into a scratch database on the server. Two ways are measured in the same run:

- **deferral** (what the deployment does, ADR-0051): a run never waits more than 5 s for WB; it
  stores each answer and its resume time and ends; the resume sensor (a tick every 30 s) launches
  the next run, which costs ~2 s to start (DESIGN.md §4.13);
- **baseline: waiting in the run**: one run that sleeps out WB's 20 s between requests (what the
  deferral avoids: it holds the cabinet's slot and a worker all along).

Times are printed in WB's seconds (measured wall time × scale).
"""

from __future__ import annotations

import argparse
import math
import time
import uuid
from datetime import UTC, datetime

import psycopg
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from optima_pipelines.db.urls import with_database
from optima_pipelines.sync import ads
from optima_pipelines.sync.runs import SyncInput
from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.wb import PostgresLimiterStore, RateLimiter, WbClient, WbConfig
from wb_simulator import CabinetSpec, Simulator, serve

SENSOR_TICK = 30.0  # wb_sync_resume_sensor's interval, WB seconds
RUN_START = 2.0  # a queued run's process start, WB seconds (DESIGN.md §4.13)
ADR_WAIT = 5.0  # a run waits at most this long for WB's limiter (ADR-0051)
WINDOW = 300.0  # the ads cadence


def cycle(
    sim: Simulator, base_url: str, db_url: str, cabinet: str, scale: float, max_wait: float
) -> tuple[float, int, int]:
    """(WB seconds from the first run's start to the whole cycle stored, runs, fullstats requests)."""
    token = sim.token(cabinet)
    schema = "optima_bench"

    def conn() -> psycopg.Connection:
        return connect(db_url, schema)

    limiter = RateLimiter(PostgresLimiterStore(conn))
    config = WbConfig.for_base_url(base_url, time_scale=scale, max_wait_seconds=max_wait / scale)
    started = time.perf_counter()
    runs = requests = 0
    while True:
        runs += 1
        with WbClient(cabinet, token, config=config, limiter=limiter) as client:
            inp = SyncInput(connect=conn, client=lambda: client, cabinet_id=cabinet, run_id=None, trigger="scheduled")
            _, stats = ads.sync_ads(inp)
        requests += stats.requests
        if stats.deferred_until is None:
            return (time.perf_counter() - started) * scale, runs, requests
        # The resume sensor sees the pause over at its first tick after resume_at; the run then starts.
        resume = (stats.deferred_until - datetime.now(UTC)).total_seconds()
        tick = SENSOR_TICK / scale
        wait = max(0.0, math.ceil(max(resume, 0.0) / tick) * tick) + RUN_START / scale
        time.sleep(wait)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--campaigns", default="40,160,400")
    args = parser.parse_args()
    sizes = [int(n) for n in args.campaigns.split(",")]

    name = f"optima_bench_{uuid.uuid4().hex[:8]}"
    with connect(args.server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db_url = with_database(args.server_url, name)
    try:
        upgrade(db_url, "optima_bench")
        now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
        specs = [
            CabinetSpec(id=f"{mode}{n}", products=60, orders_per_day=30, history_days=20, campaigns=n)
            for n in sizes
            for mode in ("d", "w")
        ]
        sim = Simulator(seed=3, cabinets=specs, time_scale=args.scale, now=now)
        with connect(db_url, "optima_bench") as conn:
            for spec in specs:  # tokens stay with the bench's clients: the rows are for sync_state
                conn.execute("INSERT INTO cabinets (id, name) VALUES (%s, %s)", (spec.id, spec.id))
            conn.commit()
        print(f"WB clock ×{args.scale:g}; resume sensor tick {SENSOR_TICK:g} s, run start {RUN_START:g} s (WB seconds)")
        print(
            f"{'campaigns':>9} {'with stats':>10} {'requests':>8} | {'deferral: runs':>14} {'cycle s':>8} | "
            f"{'baseline: wait in run, cycle s':>30} | fits 5 min"
        )
        with serve(sim) as base_url:
            for n in sizes:
                with_stats = sum(1 for c in sim.truth.campaigns(f"d{n}") if c["status"] in ads.STAT_STATUSES)
                deferred_s, runs, requests = cycle(sim, base_url, db_url, f"d{n}", args.scale, ADR_WAIT)
                waited_s, _, _ = cycle(sim, base_url, db_url, f"w{n}", args.scale, max_wait=25.0)
                print(
                    f"{n:>9} {with_stats:>10} {requests:>8} | {runs:>14} {deferred_s:>8.0f} | {waited_s:>30.0f} | "
                    f"{'yes' if deferred_s <= WINDOW else 'no'}"
                )
        print("(cycle times include our own processing multiplied by the scale: an upper bound)")
        per_window = math.floor(WINDOW / (SENSOR_TICK + RUN_START)) + 1
        print(
            f"at most ~{per_window} fullstats requests per cabinet per 5-min window with deferral "
            f"(≈ {per_window * ads.CHUNK} campaigns with statistics); WB itself allows {int(WINDOW / 20)} "
            f"({int(WINDOW / 20) * ads.CHUNK} campaigns)"
        )
    finally:
        with connect(args.server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
