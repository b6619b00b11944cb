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

from optima_pipelines.timeutil import MOSCOW, today_moscow
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from wb_simulator import CabinetSpec, Simulator, serve

pytestmark = pytest.mark.system


def orders_by_day(conn, cabinet: str, day) -> dict[str, tuple]:
    rows = conn.execute(
        "SELECT srid, total_price, is_cancel FROM wb_orders WHERE cabinet_id = %s AND day = %s", (cabinet, day)
    ).fetchall()
    return {srid: (price, cancel) for srid, price, cancel in rows}


def truth_by_day(sim: Simulator, cabinet: str, day) -> dict[str, tuple]:
    return {o["srid"]: (Decimal(str(o["totalPrice"])), o["isCancel"]) for o in sim.truth.orders(cabinet, day)}


def sync_started(env: str, conn, cabinet: str) -> datetime:
    """When the demo's orders sync of this cabinet started (its run in Dagster's storage)."""
    row = conn.execute(
        f"SELECT r.start_time FROM dagster_{env}.runs r JOIN dagster_{env}.run_tags t ON t.run_id = r.run_id"
        " WHERE r.pipeline_name = 'digitization_backfill' AND t.key = 'optima/cabinet' AND t.value = %s",
        (cabinet,),
    ).fetchone()
    assert row is not None and row[0], f"no orders sync of {cabinet} in Dagster's storage"
    return datetime.fromtimestamp(row[0], MOSCOW)


def test_demo_loads_the_simulated_cabinets_and_prints_them(optima_env, warehouse_conn, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "optima_pipelines.cli", "demo", "--days", "3", "--cabinets", "2"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OPTIMA_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    yesterday = today_moscow() - timedelta(days=1)
    assert f"demo-2   {yesterday.isoformat()}" in result.stdout
    # The landing is on by default: the demo's WB answers are kept, and it says how to replay them.
    assert "WB answers in" in result.stdout and "optima-pipelines replay --cabinet demo-1" in result.stdout
    # What arrived is what the simulated WB held when the demo loaded it: WB's clock pinned to the
    # start of each cabinet's sync (cancellations of closed days keep arriving afterwards).
    from wb_simulator.demo import SimSetup

    for cabinet in ("demo-1", "demo-2"):
        sim, _ = SimSetup(seed=1, cabinets=2, prefix="demo", time_scale=60).build(
            now=sync_started(optima_env, warehouse_conn, cabinet)
        )
        for day in (today_moscow() - timedelta(days=2), yesterday):
            assert orders_by_day(warehouse_conn, cabinet, day) == truth_by_day(sim, cabinet, day)
            assert orders_by_day(warehouse_conn, cabinet, day)
            # The РНП of the closed day agrees with WB's own books per product, to the kopeck:
            # orders, their sum and cancellations of the order day, and the day's ad spend.
            truth = sim.truth.day_totals(cabinet, day)["by_nm"]
            rows = warehouse_conn.execute(
                "SELECT nm_id, orders_count, orders_sum, cancellations_count, ad_spend FROM rnp_daily"
                " WHERE cabinet_id = %s AND day = %s",
                (cabinet, day),
            ).fetchall()
            got = {nm: (n, s, c, a) for nm, n, s, c, a in rows if n or a}
            want = {
                nm: (t.get("orders", 0), Decimal(str(t.get("orders_sum", 0))), t.get("cancels", 0),
                     Decimal(str(t.get("ad_spend", 0))))
                for nm, t in truth.items()
                if t.get("orders", 0) or t.get("ad_spend", 0)
            }  # fmt: skip
            assert got == want, f"rnp_daily of {cabinet} on {day} differs from WB's books"
            assert sum(v[3] for v in got.values()) > 0, "the demo's ads reached the РНП"
    # The runs are in the deployment's own Dagster storage, as the UI shows them.
    runs = warehouse_conn.execute(
        f"SELECT count(*) FROM dagster_{optima_env}.runs WHERE pipeline_name = 'digitization_backfill' AND status = 'SUCCESS'"
    ).fetchone()[0]
    assert runs == 2


KILLABLE_RUN = textwrap.dedent(
    """
    from optima_pipelines.orchestration.runconfig import cabinet_run_config
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
        from optima_pipelines.orchestration.runconfig import cabinet_run_config

        job = defs.get_job_def("digitization_increment")
        assert job.execute_in_process(run_config=cabinet_run_config(job.name, "k1"), instance=dagster_instance).success
        ours = {r[0] for r in warehouse_conn.execute("SELECT sale_id FROM wb_sales").fetchall()}
        assert ours == {s["saleID"] for s in sim.truth.sales("k1")}
        for day in (today_moscow() - timedelta(days=d) for d in (1, 10, 40)):
            assert orders_by_day(warehouse_conn, "k1", day) == truth_by_day(sim, "k1", day)
        assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == len(sim.truth.orders("k1"))
