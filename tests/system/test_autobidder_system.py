"""`autobidder-sync` through the real daemon: requested → run id on the request within 30 s → succeeded."""

from __future__ import annotations

import time

import pytest

from optima_pipelines.warehouse import requests as outbox
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system


def test_a_requested_autobidder_sync_gets_its_run_id_within_30s_and_succeeds(warm_stack):  # type: ignore[no-untyped-def]
    stack, dep = warm_stack, warm_stack.dev
    stack.add_cabinets(CabinetSpec(id="ab1", products=10, orders_per_day=20, history_days=10, campaigns=4))
    stack.start("requests_sensor")
    with stack.warehouse() as warehouse_conn:
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
        assert rows == len(stack.sim.truth.campaigns("ab1"))
        tags = dict(
            warehouse_conn.execute(
                f"SELECT key, value FROM dagster_{stack.env}.run_tags WHERE run_id = %s", (request.run_id,)
            ).fetchall()
        )
    assert tags["optima/queue"] == "autobidder-sync" and tags["optima/cabinet"] == "ab1"
    assert int(tags["dagster/priority"]) > 0
