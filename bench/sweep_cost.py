"""Benchmark: what one sweep over N cabinets costs, with a run's warehouse connections pooled, against
a connection per use (how every run worked before: the warehouse's connections and Dagster's storage).

    python bench/sweep_cost.py [--quick] [--cabinets 200] [--rounds 2] [--job ads_sync_sweep]

A scratch environment with ``--cabinets`` cabinets served by the WB simulator over HTTP (in this
process; WB's limits run fast enough that no cabinet waits), their data loaded by a first sweep.
Then the sweep job (``--job``, the 5-minute ads sync by default: the most frequent cadence) runs
again, ``--rounds`` times each way, alternating, every run in a fresh process that executes the
job in process (the work of a run worker, its imports not counted). Measured per sweep: wall
time, the run process's CPU, PostgreSQL's CPU (the server's processes, those that ended
included: other databases' work on a shared server counts too, so compare the two ways of one
run) and the PostgreSQL sessions the database saw opened (``pg_stat_database.sessions``). The
baseline, in the same run on the same data: the same sweep with every ``Warehouse.connect()``
opening a connection of its own and Dagster's storage a session per statement (dagster-postgres's
NullPool, which orchestration/storage.py replaces).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option

TITLE = "one sweep over N cabinets: CPU, PostgreSQL sessions; pooled connections vs a connection per use"
OPTIONS = [
    Option("cabinets", 200, 12, "cabinets in the sweep"),
    Option("rounds", 2, 1, "measured sweeps each way (alternating)"),
    Option("job", "ads_sync_sweep", "ads_sync_sweep", "the sweep job", kind="str"),
]

#: The run process: executes the sweep in process and prints its CPU and wall time (imports excluded).
CHILD = r"""
import json, sys, time
from optima_pipelines.definitions import defs
from optima_pipelines.orchestration.runconfig import op_name
if sys.argv[3] == "unpooled":
    from optima_pipelines.db.connection import connect
    from optima_pipelines.resources import warehouse

    class Unpooled:  # every connect() a connection of its own, as before pooling
        def __init__(self, url, schema, *, application_name, size):
            self.args = (url, schema, application_name)
        def connect(self, *, autocommit=False):
            url, schema, app = self.args
            return connect(url, schema, autocommit=autocommit, application_name=app)
        def stats(self):
            return {"sessions": 0, "checkouts": 0, "overflow": 0}
        def close(self):
            pass

    warehouse.Pool = Unpooled
    from optima_pipelines.orchestration import storage  # Dagster's storage as dagster-postgres has it

    storage.share_storage_engine = lambda storage, engine: None
from dagster import DagsterInstance
job_name, cabinets = sys.argv[1], json.loads(sys.argv[2])
job = defs.get_job_def(job_name)
cpu, wall = time.process_time(), time.perf_counter()
result = job.execute_in_process(
    run_config={"ops": {op_name(job_name): {"config": {"cabinet_ids": cabinets, "window": "bench"}}}},
    instance=DagsterInstance.get(), tags={"optima/trigger": "schedule"}, raise_on_error=False,
)
failures = [e.step_failure_data.error.message[:1500] for e in result.all_events if e.is_step_failure]
print(json.dumps({"ok": result.success, "failures": failures, "cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                  "run_id": result.run_id}))
"""


def sessions(conn, database: str) -> int:  # type: ignore[no-untyped-def]
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (database,)).fetchone()[0])


def run(bench: Bench, opts: argparse.Namespace) -> None:
    from optima_pipelines.db.connection import connect
    from optima_pipelines.db.urls import parse_url
    from optima_pipelines.partitions import CABINETS_NAME
    from optima_pipelines.settings import load_settings
    from optima_pipelines.warehouse.cabinets import add_cabinet
    from optima_pipelines.warehouse.secrets import TokenCipher, load_key
    from tests.wb_syncs import TIME_SCALE, simulator
    from wb_simulator import CabinetSpec, serve

    ids = [f"c{i:04d}" for i in range(opts.cabinets)]
    sim = simulator(
        *[CabinetSpec(id=c, products=5, orders_per_day=40, history_days=3, campaigns=2) for c in ids], seed=3
    )
    with (
        serve(sim) as base_url,
        bench.environment("sweepcost", OPTIMA_WB_BASE_URL=base_url, OPTIMA_WB_TIME_SCALE=str(TIME_SCALE)) as env,
    ):
        cipher = TokenCipher(load_key(load_settings()))
        with env.connect() as conn:
            for cabinet in ids:
                add_cabinet(conn, cipher, cabinet, cabinet.upper(), sim.token(cabinet))
        env.instance().add_dynamic_partitions(CABINETS_NAME, ids)
        database = parse_url(env.database_url).database
        stats = connect(bench.server_url, autocommit=True)

        def sweep(way: str) -> dict[str, float]:
            before_sessions, before_pg = sessions(stats, database), harness.postgres_cpu()
            proc = subprocess.run(
                [sys.executable, "-W", "ignore", "-c", CHILD, opts.job, json.dumps(ids), way],
                check=True,
                capture_output=True,
                text=True,
                env=os.environ.copy(),
            )
            out = proc.stdout.strip().splitlines()[-1]
            time.sleep(1.5)  # the ended sessions' statistics reach pg_stat_database
            got = json.loads(out)
            if not got["ok"]:
                raise RuntimeError(f"the {way} sweep failed: run {got['run_id']}: {got['failures']}")
            got["pg_cpu"] = harness.postgres_cpu() - before_pg
            got["sessions"] = sessions(stats, database) - before_sessions
            harness.say(
                f"    {way}: {got['wall']:.1f} s, run CPU {got['cpu']:.2f} s, PostgreSQL CPU {got['pg_cpu']:.2f} s, "
                f"{got['sessions']} sessions (load {harness.load_average():.1f})"
            )
            return got

        harness.say(f"  {opts.job} over {len(ids)} cabinets: a first sweep loads their data")
        sweep("pooled")
        results: dict[str, list[dict[str, float]]] = {"pooled": [], "unpooled": []}
        for _ in range(opts.rounds):
            for way in ("unpooled", "pooled"):
                results[way].append(sweep(way))
        stats.close()

    def med(way: str, key: str) -> float:
        return statistics.median(r[key] for r in results[way])

    n = len(ids)
    base = "a connection per use"
    for key, name, unit in (
        ("cpu", "run CPU per cabinet", "ms"),
        ("pg_cpu", "PostgreSQL CPU per cabinet", "ms"),
        ("sessions", "PostgreSQL sessions opened per cabinet", ""),
        ("wall", f"wall time of the sweep ({n} cabinets)", "s"),
    ):
        scale = 1000 / n if unit == "ms" else (1 / n if key == "sessions" else 1)
        bench.figure(
            f"{opts.job}, {name}",
            med("pooled", key) * scale,
            unit or "sessions",
            baseline_name=base,
            baseline=med("unpooled", key) * scale,
            higher_is_better=False,
        )


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
