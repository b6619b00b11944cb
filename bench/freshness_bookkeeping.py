"""Benchmark: what the freshness bookkeeping costs a cabinet-sync, and what reading it costs.

    python bench/freshness_bookkeeping.py [--quick] [--cabinets 1000] [--syncs 20] [--rounds 3]

Every sync of a cabinet's feed confirms it in its own transaction: ``sync.runs.finish`` marks the
sync state and records each feed's figures (``operations.records.record_feed_sync``), whose upsert of
``ops_feed_sync_totals`` now also writes ``confirmed_at`` and ``last_error`` (migration 0019).
On a scratch environment with ``--cabinets`` cabinets (the WB simulator over HTTP, in this process):

- **the bookkeeping per cabinet-sync**: ``finish`` of an ads sync (two feeds, its state) for every
  cabinet, rows already there (a steady state), timed per cabinet: process CPU and wall. Baseline,
  same run, same rows, alternating rounds: the same ``finish`` with the totals upsert as it was
  before (0006's statement: no ``confirmed_at`` nor ``last_error``);
- **the sync it belongs to**: the 5-minute ads sync of ``--syncs`` cabinets against the simulator,
  per cabinet (its finish included), the figure the bookkeeping's difference is a share of;
- **the reads**: ``operations.freshness.read_freshness`` over every cabinet and the ten watched feeds (what
  each tick of feed_freshness_sensor and each /metrics scrape runs), against the scrape's existing
  ``feed_sync_totals`` query over the same rows.

PostgreSQL's own CPU is not in the process figures: the wall times include the round trips and the
server's work (client and server share the machine).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "freshness bookkeeping per cabinet-sync (finish with confirmed_at vs without) and its reads"
OPTIONS = [
    Option("cabinets", 1000, 100, "cabinets (rows of the bookkeeping, and read)"),
    Option("syncs", 20, 5, "cabinets whose ads sync runs against the simulator"),
    Option("rounds", 3, 2, "alternating rounds of the bookkeeping each way"),
]

#: What migration 0019 added to operations/sql/record_feed_sync.sql, and what the statement was
#: before it (the baseline): each cut must match exactly once, or the baseline would be a guess.
CUTS_0019 = (
    ("last_success_at, confirmed_at, last_error\n", "last_success_at\n"),
    (
        "END,\n    CASE WHEN %(confirmed)s THEN %(finished_at)s::timestamptz END,\n    %(error)s\nFROM history",
        "END\nFROM history",
    ),
)


def before_0019(statement: str) -> str:
    """record_feed_sync.sql without 0019's ``confirmed_at`` and ``last_error``: the statement as it was."""
    for cut, kept in CUTS_0019:
        if statement.count(cut) != 1:
            raise SystemExit(f"record_feed_sync.sql changed: {cut!r} is not in it once; update CUTS_0019")
        statement = statement.replace(cut, kept)
    # The two SET clauses 0019 appended end the statement, after the last_success_at one.
    last = "last_success_at = greatest(t.last_success_at, EXCLUDED.last_success_at)"
    head, found, tail = statement.partition(last)
    if not found or "confirmed_at = greatest(" not in tail or "last_error = CASE" not in tail:
        raise SystemExit("record_feed_sync.sql changed: 0019's SET clauses are not last; update before_0019")
    return head + last + "\n"


def run(bench: Bench, opts: argparse.Namespace) -> None:
    from optima_pipelines.db.sqlfiles import SqlFiles
    from optima_pipelines.operations import freshness, metrics, records
    from optima_pipelines.resources.warehouse import Warehouse
    from optima_pipelines.resources.wb import WbApi
    from optima_pipelines.settings import load_settings
    from optima_pipelines.sync import ads
    from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish
    from optima_pipelines.warehouse.cabinets import add_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key
    from tests.wb_syncs import TIME_SCALE, simulator
    from wb_simulator import CabinetSpec, serve

    ids = [f"c{i:04d}" for i in range(opts.cabinets)]
    synced = ids[: opts.syncs]
    sim = simulator(*[CabinetSpec(id=c, products=5, orders_per_day=20, history_days=3, campaigns=2) for c in synced])
    with (
        serve(sim) as base_url,
        bench.environment("fresh", OPTIMA_WB_BASE_URL=base_url, OPTIMA_WB_TIME_SCALE=str(TIME_SCALE)) as env,
    ):
        cipher = TokenCipher(load_key(load_settings()))
        with env.connect() as conn:
            for cabinet in ids:
                add_cabinet(conn, cipher, cabinet, cabinet.upper(), sim.token(cabinet) if cabinet in synced else None)
        warehouse = Warehouse(database_url=env.database_url)

        def bookkeeping(statement: str | None) -> tuple[float, float]:
            """finish() of a two-feed sync for every cabinet: (CPU s, wall s) per cabinet."""
            original = records.load
            if statement is not None:
                records.load = lambda name: statement if name == "record_feed_sync" else original(name)  # type: ignore[assignment]
            try:
                cpu, wall = time.process_time(), time.perf_counter()
                with env.connect() as conn:
                    for cabinet in ids:
                        runs = [
                            FeedLoad(ads.QUEUE, feed, cabinet, "bench", "scheduled")
                            for feed in (ads.CAMPAIGNS_FEED, ads.STATS_FEED)
                        ]
                        finish(conn, runs, state_feed=ads.STATE_FEED)
                return (time.process_time() - cpu) / len(ids), (time.perf_counter() - wall) / len(ids)
            finally:
                records.load = original  # type: ignore[assignment]

        harness.say(f"  {len(ids)} cabinets: a first bookkeeping round creates the rows")
        bookkeeping(None)
        before = before_0019(records.load("record_feed_sync"))
        new, old = [], []
        for _ in range(opts.rounds):
            new.append(bookkeeping(None))
            old.append(bookkeeping(before))
        new_cpu, new_wall = statistics.median(c for c, _ in new), statistics.median(w for _, w in new)
        old_cpu, old_wall = statistics.median(c for c, _ in old), statistics.median(w for _, w in old)
        bench.figure(
            "bookkeeping per cabinet-sync, wall",
            new_wall * 1000,
            "ms",
            baseline_name="before 0019",
            baseline=old_wall * 1000,
            higher_is_better=False,
        )
        bench.figure(
            "bookkeeping per cabinet-sync, CPU",
            new_cpu * 1000,
            "ms",
            baseline_name="before 0019",
            baseline=old_cpu * 1000,
            higher_is_better=False,
        )

        wb = WbApi(warehouse=warehouse)
        per_sync: list[tuple[float, float]] = []
        for cabinet in synced:
            with wb.client(cabinet) as client:
                cpu, wall = time.process_time(), time.perf_counter()
                ads.sync(
                    SyncInput(
                        connect=warehouse.connect,
                        client=lambda c=client: c,
                        cabinet_id=cabinet,
                        run_id="bench",
                        trigger="scheduled",
                    )
                )
                per_sync.append((time.process_time() - cpu, time.perf_counter() - wall))
        sync_cpu, sync_wall = statistics.median(c for c, _ in per_sync), statistics.median(w for _, w in per_sync)
        for what, sync_time, difference in (
            ("wall", sync_wall, new_wall - old_wall),
            ("CPU", sync_cpu, new_cpu - old_cpu),
        ):
            bench.figure(
                f"ads sync of one cabinet, {what}",
                sync_time * 1000,
                "ms",
                baseline_name="its bookkeeping's difference",
                baseline=difference * 1000,
                higher_is_better=False,
                note=f"difference = {100 * difference / sync_time:+.2f} % of the sync's {what}",
            )

        # The reads, over every cabinet: every feed confirmed for all but a few.
        now = datetime.now(UTC)
        with env.connect() as conn:
            for feed in freshness.WATCHED_FEEDS:
                for cabinet in ids:
                    records.record_feed_sync(
                        conn,
                        queue=feed.queue,
                        feed=feed.feed,
                        cabinet_id=cabinet,
                        run_id="b",
                        trigger="scheduled",
                        started_at=now - timedelta(seconds=1),
                        finished_at=now,
                    )
            totals = SqlFiles(metrics.__file__)("feed_sync_totals")

            def read_freshness() -> None:
                freshness.read_freshness(conn)

            def read_totals() -> None:
                conn.execute(totals).fetchall()

            fresh_s, _ = harness.best_of(5, read_freshness)
            totals_s, _ = harness.best_of(5, read_totals)
        bench.figure(
            f"read_freshness over {len(ids)} cabinets x {len(freshness.WATCHED_FEEDS)} feeds",
            fresh_s * 1000,
            "ms",
            baseline_name="the scrape's feed_sync_totals",
            baseline=totals_s * 1000,
            higher_is_better=False,
        )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
