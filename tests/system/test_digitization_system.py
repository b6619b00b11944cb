"""Digitization as a user meets it: the demo command, and a load killed with SIGKILL midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from optima_pipelines.cabinets import add_cabinet
from optima_pipelines.secrets import TokenCipher, load_key
from optima_pipelines.timeutil import MOSCOW, today_moscow
from wb_simulator import CabinetSpec, Simulator, serve

pytestmark = pytest.mark.system


def orders_by_day(conn, cabinet: str, day) -> dict[str, tuple]:
    rows = conn.execute(
        "SELECT srid, total_price, is_cancel FROM wb_orders WHERE cabinet_id = %s AND day = %s", (cabinet, day)
    ).fetchall()
    return {srid: (price, cancel) for srid, price, cancel in rows}


def truth_by_day(sim: Simulator, cabinet: str, day) -> dict[str, tuple]:
    return {o["srid"]: (Decimal(str(o["totalPrice"])), o["isCancel"]) for o in sim.truth.orders(cabinet, day)}


def test_demo_loads_the_simulated_cabinets_and_prints_them(optima_env, warehouse_conn, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "optima_pipelines.cli", "demo", "--days", "3", "--cabinets", "2"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OPTIMA_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    yesterday = today_moscow() - timedelta(days=1)
    assert f"demo-2   {yesterday.isoformat()}" in result.stdout
    # What arrived is what the simulated WB holds (closed days: today's orders are still arriving).
    from wb_simulator.demo import SimSetup

    sim, _ = SimSetup(seed=1, cabinets=2, prefix="demo", time_scale=60).build()
    for cabinet in ("demo-1", "demo-2"):
        for day in (today_moscow() - timedelta(days=2), yesterday):
            assert orders_by_day(warehouse_conn, cabinet, day) == truth_by_day(sim, cabinet, day)
            assert orders_by_day(warehouse_conn, cabinet, day)
    # The runs are in the deployment's own Dagster storage, as the UI shows them.
    runs = warehouse_conn.execute(
        f"SELECT count(*) FROM dagster_{optima_env}.runs WHERE pipeline_name = 'digitization_backfill' AND status = 'SUCCESS'"
    ).fetchone()[0]
    assert runs == 2


KILLABLE_RUN = textwrap.dedent(
    """
    from optima_pipelines.runconfig import cabinet_run_config
    from optima_pipelines.definitions import defs
    from dagster import DagsterInstance
    job = defs.get_job_def("digitization_increment")
    with DagsterInstance.get() as instance:
        job.execute_in_process(run_config=cabinet_run_config(job.name, "k1"), instance=instance)
    """
)


def test_a_load_killed_midway_leaves_whole_pages_and_a_rerun_converges(
    optima_env, settings, warehouse_conn, dagster_instance, monkeypatch
):
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
    sim = Simulator(
        seed=3, cabinets=[CabinetSpec(id="k1", orders_per_day=150, history_days=95)], time_scale=600, now=now
    )
    add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), "k1", "K1", sim.token("k1"))
    # Orders arrive at once; every sales request hangs long enough for the kill to land mid-run.
    sim.faults.set("GET statistics/api/v1/supplier/sales", latency_s=30.0)
    with serve(sim) as base_url:
        monkeypatch.setenv("OPTIMA_WB_BASE_URL", base_url)
        monkeypatch.setenv("OPTIMA_WB_TIME_SCALE", "600")
        proc = subprocess.Popen([sys.executable, "-c", KILLABLE_RUN], env=os.environ.copy(), start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0:
                assert proc.poll() is None, "the run ended before it could be killed"
                assert time.monotonic() < deadline, "orders never arrived"
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)

        # What the killed run left is whole: every order it committed is WB's, no sale half-loaded,
        # and its cursor matches what it committed.
        after_kill = warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0]
        assert after_kill == len(sim.truth.orders("k1"))
        assert warehouse_conn.execute("SELECT count(*) FROM wb_sales").fetchone()[0] == 0

        sim.faults.clear()
        from optima_pipelines.definitions import defs
        from optima_pipelines.runconfig import cabinet_run_config

        job = defs.get_job_def("digitization_increment")
        assert job.execute_in_process(run_config=cabinet_run_config(job.name, "k1"), instance=dagster_instance).success
        ours = {r[0] for r in warehouse_conn.execute("SELECT sale_id FROM wb_sales").fetchall()}
        assert ours == {s["saleID"] for s in sim.truth.sales("k1")}
        for day in (today_moscow() - timedelta(days=d) for d in (1, 10, 40)):
            assert orders_by_day(warehouse_conn, "k1", day) == truth_by_day(sim, "k1", day)
        assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == len(sim.truth.orders("k1"))
