"""The raw landing's cost: CPU per WB answer, bytes per cabinet-day, and a replay against a live load.

    python bench/landing.py [--quick] [--cabinets 3] [--hours 24] [--orders-per-day 300]

The syncs' own entry points (Dagster-free, as a run calls them through ``sync.runs.run_sync``) run
against the WB simulator over real HTTP on localhost (its rate limits scaled away), into a scratch
warehouse:

1. **A cabinet's first load** (90 days of orders and sales, ads over 30 days, the finance report's
   14 days, the funnel, stocks, cards and prices), per cabinet, with the landing on, and again from
   empty with the landing off: the same answers, so the difference is the landing's (the calling
   thread's CPU: the HTTP client, decoding, merging and landing, not the in-process simulator's).
2. **A day of cadences** (``--hours`` simulated in 5-minute steps: the increment and prices every
   30 min, ads every 5, the funnel and stocks hourly) with the landing on: each ``Landing.land``
   and the run-end flush are timed on their own, against the rest of the syncs' CPU per answer.
   The Parquet bytes landed, per cabinet, scaled to 24 hours, are the cabinet-day's storage,
   against the same answers' JSON as WB sent them.
3. **A replay** of one cabinet's landing (everything phase 1 and 2 landed) into an emptied
   warehouse, against the live load of the same answers from the simulator (phase 1, landing off);
   the replayed tables are checked equal (row counts and sums) before any figure is printed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.db.connection import connect
from optima_pipelines.landing.replay import replay
from optima_pipelines.landing.store import Landing
from optima_pipelines.settings import load_settings
from optima_pipelines.sync import ads, catalog, digitization, finance, funnel, inventory
from optima_pipelines.sync.runs import Sync, SyncInput, run_sync
from optima_pipelines.timeutil import MOSCOW, today_moscow
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from optima_pipelines.wb import RateLimiter, WbClient, WbConfig
from wb_simulator import CabinetSpec, Simulator, serve

TITLE = "Raw landing of WB's answers: CPU per answer on vs off, bytes per cabinet-day, replay vs live"
OPTIONS = [
    Option("cabinets", 3, 1, "cabinets"),
    Option("hours", 24, 2, "simulated hours of cadences (phase 2)"),
    Option("orders-per-day", 300, 60, "orders per day of each cabinet"),
]

#: What a cabinet's first load runs (entry point, SyncInput.window_days).
FIRST_LOAD: list[tuple[Sync, int | None]] = [
    (digitization.sync_window, 90),
    (finance.sync_nightly, None),
    (ads.sync, 30),
    (funnel.sync_window, None),
    (inventory.sync, None),
    (catalog.full, None),
]
#: The interval cadences of a day, in minutes (the hourly stocks included).
CADENCES: list[tuple[Sync, int]] = [
    (digitization.sync_increment, 30),
    (catalog.prices, 30),
    (ads.sync, 5),
    (funnel.sync_window, 60),
    (inventory.sync, 60),
]
TABLES = ("wb_orders", "wb_sales", "wb_report_lines", "ad_campaign_stats", "rnp_funnel_stats", "stocks", "prices")
#: A table's rows of a cabinet, as a count and a sum of their hashes, without the load's bookkeeping
#: (and stocks' snapshot time: each live load has its own; the replay test checks it is replayed).
CHECK = (
    "SELECT count(*), coalesce(sum(hashtext((to_jsonb(t) - 'loaded_at' - 'run_id' - 'synced_at' - 'snapshot_at')::text)), 0) "
    "FROM {} t WHERE cabinet_id = %s"
)


class TimedLanding(Landing):
    """The landing, its ``land`` and ``flush`` timed in the calling thread's CPU."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cpu = 0.0
        self.answers = 0
        self.json_bytes = 0

    def land(self, cabinet_id: str, **kwargs: Any) -> None:
        started = time.thread_time()
        super().land(cabinet_id, **kwargs)
        self.cpu += time.thread_time() - started
        self.answers += 1
        self.json_bytes += len(kwargs["answer"])

    def flush(self) -> list[str]:
        started = time.thread_time()
        try:
            return super().flush()
        finally:
            self.cpu += time.thread_time() - started


class World:
    """The simulator, the scratch warehouse and the cabinets' clients."""

    def __init__(self, sim: Simulator, base_url: str, url: str, schema: str):
        self.sim, self.base_url, self.url, self.schema = sim, base_url, url, schema
        self.config = WbConfig.for_base_url(base_url, time_scale=1e6, max_wait_seconds=30.0)
        self.limiter = RateLimiter()
        self._tokens: dict[str, str] = {}

    def token(self, cabinet: str) -> str:
        if cabinet not in self._tokens:
            self._tokens[cabinet] = self.sim.token(cabinet)
        return self._tokens[cabinet]

    def connect(self) -> Any:
        return connect(self.url, self.schema)

    def run(self, body: Sync, cabinet: str, landing: Landing | None, window_days: int | None = None) -> int:
        """One invocation; returns the WB requests it made."""
        client = WbClient(cabinet, self.token(cabinet), config=self.config, limiter=self.limiter, landing=landing)
        with client:
            inp = SyncInput(
                connect=self.connect,
                cabinet_id=cabinet,
                run_id=f"bench-{body.__name__}",
                trigger="scheduled",
                client=lambda: client,
                window_days=window_days,
            )
            runs = run_sync(body, inp)
        return sum(r.requests for r in runs)

    def wipe(self) -> None:
        with self.connect() as conn:
            for table in (*TABLES, "ad_campaigns", "ad_campaign_products", "products", "price_history", "sync_state"):
                conn.execute(f"DELETE FROM {table}")

    def check(self, cabinet: str) -> dict[str, tuple[int, int]]:
        with self.connect() as conn:
            return {t: tuple(conn.execute(CHECK.format(t), (cabinet,)).fetchone()) for t in TABLES}  # type: ignore[misc]


@contextmanager
def cpu_and_wall() -> Iterator[dict[str, float]]:
    out: dict[str, float] = {}
    cpu, wall = time.thread_time(), time.perf_counter()
    yield out
    out["cpu"], out["wall"] = time.thread_time() - cpu, time.perf_counter() - wall


def landed_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


def run(bench: Bench, opts: Any) -> None:
    cabinets = [f"c{n}" for n in range(1, opts.cabinets + 1)]
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
    spec = {"products": 60, "orders_per_day": opts.orders_per_day, "history_days": 90, "campaigns": 6}
    sim = Simulator(seed=3, cabinets=[CabinetSpec(id=c, **spec) for c in cabinets], time_scale=1e6, now=now)
    with bench.environment("landing") as env, serve(sim) as base_url:
        world = World(sim, base_url, env.database_url, f"optima_{env.env}")
        root, spool = env.home / "landing", env.home / "spool"
        with world.connect() as conn:
            cipher = TokenCipher(load_key(load_settings()))
            for cabinet in cabinets:
                add_cabinet(conn, cipher, cabinet, cabinet.upper(), world.token(cabinet))
            conn.commit()

        # Warm-up: pyarrow's IPC and Parquet writers load on first use, once per process.
        warm = Landing(str(env.home / "warm"), env.home / "warm-spool")
        warm.land("w", method="GET", category="x", path="/x", limit_group="x", params=None,
                  request_body=None, status=200, answer=b"[]")  # fmt: skip
        warm.flush()

        # 1. The first load from empty, landing on and off, twice each, alternating (least CPU kept).
        def first_load(with_landing: Landing | None) -> dict[str, float]:
            world.wipe()
            requests = 0
            with cpu_and_wall() as spent:
                for cabinet in cabinets:
                    for body, days in FIRST_LOAD:
                        requests += world.run(body, cabinet, with_landing, days)
                if with_landing is not None:
                    with_landing.flush()
            spent["requests"] = requests
            return spent

        ons, offs = [], []
        live_check: dict[str, Any] = {}
        for n in range(2):
            landing = TimedLanding(str(root if n else env.home / "landing-round-1"), spool)
            ons.append(first_load(landing))
            checked = {c: world.check(c) for c in cabinets}
            if live_check and checked != live_check:
                raise RuntimeError("two loads of the same answers disagree: no figures")
            live_check = checked
            offs.append(first_load(None))
            if {c: world.check(c) for c in cabinets} != live_check:
                raise RuntimeError("the loads with and without the landing disagree: no figures")
        on, off = min(ons, key=lambda x: x["cpu"]), min(offs, key=lambda x: x["cpu"])
        first_answers, first_json = landing.answers, landing.json_bytes
        first_bytes = landed_bytes(root)
        harness.say(
            f"  first load: {first_answers} answers, {first_json / 1e6:.1f} MB of JSON → {first_bytes / 1e6:.2f} MB "
            f"landed; CPU {[round(x['cpu'], 2) for x in ons]} s on, {[round(x['cpu'], 2) for x in offs]} s off"
        )

        # 3a. Replay every cabinet's first load into the emptied warehouse.
        world.wipe()
        today = today_moscow()
        span = {"first": today - timedelta(days=1), "last": today + timedelta(days=1)}
        with cpu_and_wall() as replayed:
            reports = [replay(landing, world.connect, c, **span) for c in cabinets]
        if {c: world.check(c) for c in cabinets} != live_check:
            raise RuntimeError("the replay's tables differ from the live first load's: no figures")
        if any(r.failed for r in reports):
            raise RuntimeError(f"replayed invocations failed: {[r.failed for r in reports]}")
        harness.say(f"  replay of the first loads: {[r.summary() for r in reports]}")

        # 2. A day of cadences, the landing on and timed.
        landing.cpu, landing.answers, landing.json_bytes = 0.0, 0, 0
        before_day = landed_bytes(root)
        sync_cpu = 0.0
        steps = opts.hours * 12
        for step in range(steps):
            sim.advance(timedelta(minutes=5))
            minute = step * 5
            with cpu_and_wall() as spent:
                for cabinet in cabinets:
                    for body, every in CADENCES:
                        if minute % every == 0:
                            world.run(body, cabinet, landing)
                landing.flush()  # a sweep's run ends: its answers become Parquet
            sync_cpu += spent["cpu"]
        day_answers, day_json = landing.answers, landing.json_bytes
        day_bytes = landed_bytes(root) - before_day
        by_feed = {d.name.removeprefix("feed="): round(landed_bytes(d) / 1e6, 2) for d in sorted(root.glob("feed=*"))}
        harness.say(f"  landed MB by feed (first load and the day): {by_feed}")
        per_cabinet_day = day_bytes / len(cabinets) * 24 / opts.hours
        harness.say(
            f"  {opts.hours} h of cadences: {day_answers} answers, {day_json / 1e6:.2f} MB JSON → "
            f"{day_bytes / 1e6:.3f} MB landed in {len(list(root.rglob('*.parquet')))} files in all"
        )

        # 3b. Replay one cabinet's whole landing (first load and the day) into an emptied warehouse.
        cabinet = cabinets[0]
        final_check = world.check(cabinet)
        world.wipe()
        with cpu_and_wall() as whole:
            report = replay(landing, world.connect, cabinet, **span)
        if world.check(cabinet) != final_check or report.failed:
            raise RuntimeError(f"the replay of {cabinet}'s day differs from the live syncs' ({report.failed[:2]})")
        harness.say(f"  replay of {cabinet}'s whole landing in {whole['wall']:.2f} s: {report.summary()}")

    per_answer_on = (on["cpu"]) / first_answers * 1000
    per_answer_off = (off["cpu"]) / first_answers * 1000
    bench.figure(
        f"first load of {len(cabinets)} cabinet(s), CPU per WB answer, landing on ({first_answers} answers)",
        per_answer_on,
        "ms",
        baseline_name="landing off, same answers",
        baseline=per_answer_off,
        higher_is_better=False,
    )
    rest = (sync_cpu - landing.cpu) / day_answers * 1000
    bench.figure(
        f"{opts.hours} h of cadences: the landing's CPU per answer ({day_answers} answers, land + flush)",
        landing.cpu / day_answers * 1000,
        "ms",
        baseline_name="the rest of the sync per answer (HTTP, decode, merge)",
        baseline=rest,
        higher_is_better=False,
    )
    bench.figure(
        "bytes landed per cabinet-day (Parquet, zstd)",
        per_cabinet_day / 1e6,
        "MB",
        baseline_name="the same answers as WB's JSON",
        baseline=day_json / len(cabinets) * 24 / opts.hours / 1e6,
        higher_is_better=False,
    )
    bench.figure(
        "bytes landed by a cabinet's first load (90 days of statistics)",
        first_bytes / len(cabinets) / 1e6,
        "MB",
        baseline_name="the same answers as WB's JSON",
        baseline=first_json / len(cabinets) / 1e6,
        higher_is_better=False,
    )
    bench.figure(
        "replay of a cabinet's first load (90 days of statistics) from the landing, wall per cabinet",
        replayed["wall"] / len(cabinets),
        "s",
        baseline_name="the same load from the simulator (WB's limits scaled away), landing off",
        baseline=off["wall"] / len(cabinets),
        higher_is_better=False,
        note=f"replay CPU {replayed['cpu'] / len(cabinets):.2f} s/cabinet; at WB's real limits the live load "
        "waits a minute per statistics page and 20 s per fullstats request",
    )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
