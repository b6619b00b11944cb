"""How fast the WB simulator builds a big cabinet and pages its orders out.

    python bench/wb_sim.py [--quick] [--orders-per-day 2300] [--days 90]

Builds one cabinet of ~orders-per-day × days orders, then serves the flag=0 orders feed over real
HTTP (in-process server on localhost) page by page to the end. Baselines, same run: one page
encoded with the standard library's json instead of orjson (what the simulator uses), and the
rate at which the simulator generates the cabinet's orders in the first place.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from wb_simulator import CabinetSpec, Simulator, rows, serve

TITLE = "WB simulator: build a big cabinet and page its orders feed out over HTTP"
OPTIONS = [
    Option("orders-per-day", 2300, 300, "orders per day of the cabinet"),
    Option("days", 90, 10, "days of history"),
]


def run(bench: Bench, opts: Any) -> None:
    started = time.perf_counter()
    sim = Simulator(
        seed=1,
        cabinets=[CabinetSpec(id="big", products=200, orders_per_day=opts.orders_per_day, history_days=opts.days)],
        time_scale=1e6,
        now=datetime(2026, 8, 20, 12, 0),
    )
    build_s = time.perf_counter() - started
    cab = sim.cabinets["big"]
    t = sim.now_ts()
    keep = sim.retention_from(t)
    harness.say(f"  cabinet: {len(cab.orders):,} orders generated in {build_s:.2f} s")

    # Encoding one full page of rows: orjson (the simulator's) against the standard library's json.
    page = [rows.order_row(o, t) for o in cab.orders_changed_since(0, t, keep, 80_000)]
    std_s, _ = harness.best_of(3, lambda: json.dumps(page, ensure_ascii=False).encode())
    orjson_s, _ = harness.best_of(3, lambda: orjson.dumps(page))

    token = sim.token("big")
    pages, total, date_from = 0, 0, "2026-01-01"
    with serve(sim) as base, httpx.Client(base_url=base, headers={"Authorization": token}, timeout=120) as client:
        started = time.perf_counter()
        while pages < 20:
            answer = client.get("/statistics/api/v1/supplier/orders", params={"dateFrom": date_from})
            body = orjson.loads(answer.content)
            pages += 1
            if not body:
                break
            total += len(body)
            date_from = body[-1]["lastChangeDate"]
        paging_s = time.perf_counter() - started
    bench.figure(f"encode one {len(page) // 1000}k-row orders page (orjson)", len(page) / orjson_s, "rows/s",
                 baseline_name="stdlib json", baseline=len(page) / std_s, higher_is_better=True)  # fmt: skip
    bench.figure(f"page the orders feed over HTTP ({total:,} rows, {pages} requests)", total / paging_s, "rows/s",
                 baseline_name="generating the cabinet's orders", baseline=len(cab.orders) / build_s,
                 higher_is_better=True)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
