"""Ingest: WB orders JSON → ``wb_orders`` rows/s, our load path against the COPY limit and pandas.

    python bench/ingest.py [--quick] [--rows 200000,1000000] [--pandas-max-rows 1000000]

For each size, the same WB orders (JSON pages of 80,000 rows, as WB pages its statistics feed) go
three ways into a scratch database:

- **ours**: the production load path, ``sync.digitization.load_feed`` with the client's msgspec
  decode of each page and ``load.merge_rows`` into ``wb_orders`` (stage, merge by key, one
  transaction per page, the run's figures recorded), timed as a fresh load into an empty table and
  again as a re-run of the same pages that changes nothing (only rows whose values differ are
  written: the re-run of an increment);
- **raw COPY** (the physical limit here): the same row tuples, already built, copied into an
  unlogged table without keys or indexes;
- **pandas.to_sql** (what most WB scripts do): ``pd.DataFrame(json.loads(page)).to_sql(...)``,
  append into a table of its own (no key, no de-duplication, money as float).

Before any figure is printed the loaded table is compared with the raw copy: same rows, same sums.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import psutil
import psycopg
from psycopg import sql

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from bench.wb_parse import make_body
from optima_pipelines.sync import digitization as dg
from optima_pipelines.sync.runs import FeedLoad, SyncInput
from optima_pipelines.timeutil import now_moscow
from optima_pipelines.wb import Order
from optima_pipelines.wb.screening import Page, decode_rows

TITLE = "WB orders JSON → wb_orders rows/s vs raw COPY (unlogged) and pandas.to_sql"
OPTIONS = [
    Option("rows", [200_000, 1_000_000], [20_000], "orders per load", kind="ints"),
    Option("pandas-max-rows", 1_000_000, 20_000, "skip the pandas baseline above this many rows"),
]

PAGE_ROWS = 80_000  # WB's statistics page
CABINET = "ingest"
COMPARE = (
    "SELECT count(*), count(DISTINCT srid), sum(total_price), sum(price_with_disc), min(date), max(cancel_date) FROM {}"
)


def pages(rows: int) -> list[bytes]:
    """WB's JSON pages for ``rows`` orders (distinct srids across pages)."""
    return [
        make_body(min(PAGE_ROWS, rows - start), seed=1 + start, offset=start) for start in range(0, rows, PAGE_ROWS)
    ]


class PagesClient:
    """Stands in for WbClient.iter_orders: the same decode (msgspec into typed rows) on stored pages,
    so that the HTTP round trip (bench/wb_sim.py measures it) is not part of the load figure."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies

    def iter_orders(self, date_from: Any, *, flag: int = 0, seen: Any = ()) -> Iterator[Page[Order]]:
        now = now_moscow()
        for body in self.bodies:
            # The client's decode: msgspec, then each row judged (wb/screening.py).
            rows, screening = decode_rows(body, list[Order], now, lambda problem, _field: RuntimeError(problem))
            yield Page(rows, screening)


@dataclass
class Cpu:
    """CPU seconds spent by this process and by the PostgreSQL backends of the measured work."""

    client: float = 0.0
    server: float | None = 0.0

    @property
    def total(self) -> float | None:
        return None if self.server is None else self.client + self.server


class MeasuredConnection:
    """``with connect() as conn`` that also adds its backend's CPU to ``cpu`` before closing (the
    backend process exits with the connection). Without access to the server's processes (a
    remote server) the server's share is unknown."""

    def __init__(self, conn: psycopg.Connection, cpu: Cpu) -> None:
        self.conn, self.cpu = conn, cpu
        try:
            self.backend: psutil.Process | None = psutil.Process(conn.info.backend_pid)
            self.started = _cpu_seconds(self.backend)
        except psutil.Error:
            self.backend = None

    def __enter__(self) -> psycopg.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        try:
            if self.backend is None or self.cpu.server is None:
                raise psutil.Error
            self.cpu.server += _cpu_seconds(self.backend) - self.started
        except psutil.Error:
            self.cpu.server = None
        self.conn.close()


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


@contextmanager
def measured(cpu: Cpu) -> Iterator[None]:
    started = time.process_time()
    yield
    cpu.client += time.process_time() - started


def load_ours(env: harness.Environment, bodies: list[bytes], cpu: Cpu) -> FeedLoad:
    with measured(cpu):
        inp = SyncInput(
            connect=lambda: MeasuredConnection(env.connect(autocommit=False), cpu),  # type: ignore[arg-type,return-value]
            client=lambda: PagesClient(bodies),  # type: ignore[arg-type,return-value]
            cabinet_id=CABINET,
            run_id="bench",
            trigger="manual",
        )
        return dg.load_feed(inp, dg.ORDERS, datetime(2026, 1, 1), flag=0)


def copy_raw(env: harness.Environment, tuples: list[tuple[Any, ...]], cpu: Cpu) -> None:
    columns = sql.SQL(", ").join(map(sql.Identifier, dg.ORDERS.columns))
    with measured(cpu), MeasuredConnection(env.connect(autocommit=False), cpu) as conn, conn.transaction():
        with conn.cursor().copy(sql.SQL("COPY raw_orders ({}) FROM STDIN").format(columns)) as copy:
            for row in tuples:
                copy.write_row(row)


def pandas_to_sql(env: harness.Environment, bodies: list[bytes]) -> None:
    import pandas as pd
    import sqlalchemy as sa

    from optima_pipelines.db.urls import sqlalchemy_url

    engine = sa.create_engine(sqlalchemy_url(env.database_url), connect_args={"options": f"-csearch_path={env.schema}"})
    try:
        for body in bodies:
            pd.DataFrame(json.loads(body)).to_sql("pandas_orders", engine, if_exists="append", index=False)
    finally:
        engine.dispose()


def compare(env: harness.Environment) -> None:
    with env.connect() as conn:
        ours = conn.execute(sql.SQL(COMPARE).format(sql.Identifier("wb_orders"))).fetchone()
        raw = conn.execute(sql.SQL(COMPARE).format(sql.Identifier("raw_orders"))).fetchone()
    if ours != raw:
        raise RuntimeError(f"wb_orders and the raw COPY disagree: {ours} != {raw}")


def run(bench: Bench, opts: Any) -> None:
    for rows in opts.rows:
        harness.say(f"  generating {rows:,} WB orders as JSON pages of {PAGE_ROWS:,}...")
        bodies = pages(rows)
        harness.say(f"  {sum(map(len, bodies)) / 1e6:.0f} MB of JSON in {len(bodies)} pages")
        with bench.environment("ingest") as env:
            with env.connect() as conn:
                conn.execute("CREATE UNLOGGED TABLE raw_orders (LIKE wb_orders INCLUDING DEFAULTS)")
            tuples = [(CABINET, *o.copy_row()) for b in bodies for o in msgspec.json.decode(b, type=list[Order])]

            copy_cpu, fresh_cpu = Cpu(), Cpu()
            started = time.perf_counter()
            copy_raw(env, tuples, copy_cpu)
            copy_s = time.perf_counter() - started
            load = harness.load_average()
            harness.say(f"  raw COPY: {copy_s:.2f} s")

            started = time.perf_counter()
            fresh = load_ours(env, bodies, fresh_cpu)
            fresh_s = time.perf_counter() - started
            fresh_load = harness.load_average()
            if fresh.merge.inserted != rows:
                raise RuntimeError(f"the fresh load inserted {fresh.merge.inserted} rows, expected {rows}")
            compare(env)
            harness.say(f"  ours, fresh: {fresh_s:.2f} s")

            started = time.perf_counter()
            again = load_ours(env, bodies, Cpu())
            again_s = time.perf_counter() - started
            if again.merge.inserted or again.merge.updated:
                raise RuntimeError(f"the re-run changed rows: {again.summary()}")
            harness.say(f"  ours, re-run changing nothing: {again_s:.2f} s")

            pandas_s = None
            if rows <= opts.pandas_max_rows:
                started = time.perf_counter()
                pandas_to_sql(env, bodies)
                pandas_s = time.perf_counter() - started
                harness.say(f"  pandas.to_sql: {pandas_s:.2f} s")

        size = f"{rows // 1000}k" if rows < 1_000_000 else f"{rows / 1e6:g}M"
        limit = "raw COPY into an unlogged table"
        bench.figure(f"wb_orders fresh load, {size} rows (parse + merge)", rows / fresh_s, "rows/s",
                     baseline_name=limit, baseline=rows / copy_s, higher_is_better=True, load=fresh_load)  # fmt: skip
        bench.figure(f"wb_orders re-run changing nothing, {size} rows", rows / again_s, "rows/s",
                     baseline_name=limit, baseline=rows / copy_s, higher_is_better=True, load=load)  # fmt: skip
        if fresh_cpu.total is not None and copy_cpu.total is not None:
            per = 100_000 / rows
            bench.figure(f"CPU per 100k rows, fresh load, {size} rows", fresh_cpu.total * per, "s",
                         baseline_name="raw COPY", baseline=copy_cpu.total * per, higher_is_better=False, load=fresh_load,
                         note=f"ours: client {fresh_cpu.client * per:.2f} s (parse, COPY) + server "
                         f"{(fresh_cpu.server or 0) * per:.2f} s; COPY: client {copy_cpu.client * per:.2f} s + "
                         f"server {(copy_cpu.server or 0) * per:.2f} s")  # fmt: skip
        if pandas_s is not None:
            bench.figure(f"wb_orders fresh load, {size} rows, vs pandas", rows / fresh_s, "rows/s",
                         baseline_name="pandas.DataFrame.to_sql", baseline=rows / pandas_s, higher_is_better=True,
                         load=fresh_load)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
