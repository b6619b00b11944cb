"""How fast the WB simulator builds a big cabinet and pages its orders out.

    python bench/wb_sim.py [--orders-per-day 2300] [--days 90]

Builds one cabinet of ~orders-per-day × days orders, then serves the flag=0 orders feed over real
HTTP (in-process server on localhost) page by page to the end, and prints the figures. The baseline,
measured in the same run, is the same pages encoded with the standard library's json instead of
orjson (what the simulator uses).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime

import httpx
import orjson

from wb_simulator import CabinetSpec, Simulator, rows, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders-per-day", type=int, default=2300)
    parser.add_argument("--days", type=int, default=90)
    args = parser.parse_args()

    started = time.perf_counter()
    sim = Simulator(
        seed=1,
        cabinets=[CabinetSpec(id="big", products=200, orders_per_day=args.orders_per_day, history_days=args.days)],
        time_scale=1e6,
        now=datetime(2026, 8, 20, 12, 0),
    )
    build_s = time.perf_counter() - started
    cab = sim.cabinets["big"]
    t = sim.now_ts()
    keep = sim.retention_from(t)

    # Baseline vs orjson: encoding one full page of rows.
    page = [rows.order_row(o, t) for o in cab.orders_changed_since(0, t, keep, 80_000)]
    started = time.perf_counter()
    std = json.dumps(page, ensure_ascii=False).encode()
    std_s = time.perf_counter() - started
    started = time.perf_counter()
    fast = orjson.dumps(page)
    orjson_s = time.perf_counter() - started

    token = sim.token("big")
    pages, total, date_from = [], 0, "2026-01-01"
    with serve(sim) as base, httpx.Client(base_url=base, headers={"Authorization": token}, timeout=120) as client:
        started = time.perf_counter()
        while len(pages) < 20:
            t0 = time.perf_counter()
            answer = client.get("/statistics/api/v1/supplier/orders", params={"dateFrom": date_from})
            body = orjson.loads(answer.content)
            pages.append((len(body), time.perf_counter() - t0, len(answer.content)))
            if not body:
                break
            total += len(body)
            date_from = body[-1]["lastChangeDate"]
        paging_s = time.perf_counter() - started

    print(
        f"cabinet: {len(cab.orders):,} orders generated ({args.orders_per_day}/day × {args.days} days) in {build_s:.2f} s"
    )
    print(f"feed: {total:,} rows in {len(pages)} requests over HTTP in {paging_s:.2f} s")
    for i, (n, secs, size) in enumerate(pages, 1):
        print(f"  page {i}: {n:>6,} rows  {size / 1e6:6.1f} MB  {secs:.2f} s")
    print(
        f"encode one {len(page):,}-row page: orjson {orjson_s * 1000:.0f} ms ({len(fast) / 1e6:.1f} MB) "
        f"vs stdlib json {std_s * 1000:.0f} ms ({len(std) / 1e6:.1f} MB): {std_s / orjson_s:.1f}x"
    )


if __name__ == "__main__":
    main()
