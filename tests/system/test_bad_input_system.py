"""Bad input through the real daemon: a request row of an unknown kind, and a token WB rejects,
never hold or flood a cabinet's scheduled syncs."""

from __future__ import annotations

import httpx
import pytest

from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinets import get_cabinet
from tests.cli_runner import run_cli
from tests.system.harness import wait_for
from wb_simulator import CabinetSpec

pytestmark = pytest.mark.system

JOB = "digitization_increment_sweep"


def runs_of(conn, cabinet: str) -> list[tuple[str, str, float]]:  # type: ignore[no-untyped-def]
    """(run id, outcome, finished at as Unix seconds) of the cabinet in the increment's sweeps."""
    return conn.execute(
        "SELECT run_id, outcome, extract(epoch FROM finished_at)::float FROM sweep_outcomes "
        "WHERE job = %s AND cabinet_id = %s ORDER BY 3",
        (JOB, cabinet),
    ).fetchall()


def test_an_unknown_request_kind_fails_and_a_rejected_token_stops_its_cabinet_until_set_token(shared_stack):  # type: ignore[no-untyped-def]
    stack, dep = shared_stack, shared_stack.dev
    small = dict(products=5, orders_per_day=5, history_days=3, campaigns=0, feedback_rate=0, questions_per_day=0)
    stack.add_cabinets(CabinetSpec(id="good", **small), CabinetSpec(id="revoked", **small))
    bad_token = stack.tokens["revoked"]
    stack.sim.revoke(bad_token)
    with stack.warehouse() as warehouse_conn:
        # A careless backend's row: a kind that does not exist, shaped like a user import of "good".
        bogus = outbox.create_request(warehouse_conn, "import-user-reports", "good", {})
        stack.start("requests_sensor", "digitization_increment_sensor")
        request = wait_for(
            lambda: (r := outbox.get_request(warehouse_conn, bogus)).status == "failed" and r,
            "the unknown kind failed",
            timeout=180,
            dep=dep,
        )
        assert request.error.startswith("unknown request kind 'import-user-reports': expected one of ")
        assert "import-user-report," in request.error
        cabinet = wait_for(
            lambda: (c := get_cabinet(warehouse_conn, "revoked")).status == "token_invalid" and c,
            "the rejected cabinet marked token_invalid",
            timeout=180,
            dep=dep,
        )
        assert "401" in cabinet.token_rejected_reason and bad_token not in cabinet.token_rejected_reason
        marked = cabinet.token_rejected_at.timestamp()

        # Two more windows: "good" keeps syncing, "revoked" is swept no more (one tick of slack).
        wait_for(
            lambda: sum(created > marked + 15 for _, status, created in runs_of(warehouse_conn, "good")) >= 2,
            "two more increment sweeps of the good cabinet",
            timeout=180,
            dep=dep,
        )
        revoked_runs = runs_of(warehouse_conn, "revoked")
        assert [outcome for _, outcome, _ in revoked_runs] == ["failed"]
        metrics = httpx.get(f"{dep.metrics_url}/metrics", timeout=30).text
        assert 'optima_cabinets{status="token_invalid"} 1.0' in metrics

        # The operator gives it a new token: it is active again and syncs.
        done = run_cli(
            "cabinets",
            "set-token",
            "revoked",
            "--token-env",
            "T",
            env={**stack.environment, "T": stack.sim.token("revoked")},
        )
        assert done.returncode == 0, done.stderr
        assert get_cabinet(warehouse_conn, "revoked").status == "active"
        wait_for(
            lambda: any(s == "succeeded" for _, s, _ in runs_of(warehouse_conn, "revoked")),
            "a successful sweep of the cabinet with its new token",
            timeout=180,
            dep=dep,
        )
        assert outbox.get_request(warehouse_conn, bogus).status == "failed"
