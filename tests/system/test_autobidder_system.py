"""`autobidder-sync` through the real daemon: requested → run id on the request within 30 s → succeeded."""

from __future__ import annotations

import time

import pytest

from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from tests.system.harness import only_automations, running_dev
from tests.wb_syncs import TIME_SCALE, simulator
from wb_simulator import CabinetSpec, serve

pytestmark = pytest.mark.system


def test_a_requested_autobidder_sync_gets_its_run_id_within_30s_and_succeeds(
    optima_env, settings, warehouse_conn, tmp_path
):
    sim = simulator(CabinetSpec(id="ab1", products=10, orders_per_day=20, history_days=10, campaigns=4))
    with serve(sim) as base_url:
        add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), "ab1", "AB1", sim.token("ab1"))
        env = {
            "OPTIMA_WB_BASE_URL": base_url,
            "OPTIMA_WB_TIME_SCALE": str(TIME_SCALE),
            **only_automations("requests_sensor"),
        }
        with running_dev(env, tmp_path) as dep:
            request_id = outbox.create_request(warehouse_conn, "autobidder-sync", "ab1", {})
            asked = time.monotonic()
            request = outbox.get_request(warehouse_conn, request_id)
            while request.run_id is None and time.monotonic() - asked < 30:
                time.sleep(0.5)
                request = outbox.get_request(warehouse_conn, request_id)
            assert request.run_id is not None, f"no run id after 30 s: {request}\n{dep.log()[-3000:]}"

            deadline = time.monotonic() + 240
            while request.status in ("pending", "running") and time.monotonic() < deadline:
                time.sleep(1)
                request = outbox.get_request(warehouse_conn, request_id)
            assert request.status == "succeeded", f"{request}\n{dep.log()[-3000:]}"
            assert dep.wait_for_run(request.run_id, timeout=30) == "SUCCESS"

    rows = warehouse_conn.execute("SELECT count(*) FROM ad_campaigns WHERE cabinet_id = 'ab1'").fetchone()[0]
    assert rows == len(sim.truth.campaigns("ab1"))
    tags = dict(
        warehouse_conn.execute(
            f"SELECT key, value FROM dagster_{optima_env}.run_tags WHERE run_id = %s", (request.run_id,)
        ).fetchall()
    )
    assert tags["optima/queue"] == "autobidder-sync" and tags["optima/cabinet"] == "ab1"
    assert int(tags["dagster/priority"]) > 0
