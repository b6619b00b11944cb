"""pricing-bulk against the simulator: 25,000 price changes through 30 % faults, per-item results, no upload twice."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from optima_pipelines.engines import pricing_bulk
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sensors.requests import requests_sensor
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.wb import WbUnavailable
from tests.engines import evaluate, execute, fast_retries, selling_at_wb, writes
from tests.wb_syncs import served, simulator
from wb_simulator import CabinetSpec
from wb_simulator.pricing import QUARANTINE_TEXT, UNKNOWN_ITEM_TEXT


def served_with(products: int, settings, warehouse_conn, dagster_instance, monkeypatch):  # type: ignore[no-untyped-def]
    """A simulator of one cabinet of ``products`` served (fast retries), for as long as the fixture lasts."""
    fast_retries(monkeypatch)
    spec = CabinetSpec(
        id="c1", products=products, orders_per_day=1, history_days=2, campaigns=0, feedback_rate=0, questions_per_day=0
    )
    sim = simulator(spec)
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


@pytest.fixture
def big(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    yield from served_with(25_000, settings, warehouse_conn, dagster_instance, monkeypatch)


@pytest.fixture
def small(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    yield from served_with(2_500, settings, warehouse_conn, dagster_instance, monkeypatch)


def uploaded_nms(sim) -> Counter:  # type: ignore[no-untyped-def]
    return Counter(item["nmID"] for w in writes(sim, "price_task") for item in w.payload["data"])


def test_25000_changes_survive_30_percent_faults_with_per_item_results_and_no_upload_twice(
    big, warehouse_conn, dagster_instance
):
    before = selling_at_wb(big, "c1")
    nms = sorted(before)
    cut = set(nms[:5])  # to a tenth: WB quarantines these
    items = [
        {"nm_id": nm, "price": price // 10 if nm in cut else price + 10, "discount": discount}
        for nm, (price, discount) in before.items()
    ]
    items[100:100] = [{"nm_id": 1_000_000_000 + i, "price": 500} for i in range(3)]  # WB knows no such product
    items += [{"nm_id": nms[-1], "price": 999}, {"nm_id": 42, "discount": 150}]  # refused before sending
    request_id = outbox.create_request(warehouse_conn, "pricing-bulk", "c1", {"items": items})
    # 30 % of every prices call fails: half before WB acts, half after (the answer is lost).
    big.faults.set("prices/*", error_rate=0.15, lost_reply=0.15)

    (run_request,) = evaluate(requests_sensor, dagster_instance)[0].run_requests
    assert run_request.job_name == "pricing_bulk" and run_request.tags["optima/cabinet"] == "c1"
    started = time.monotonic()
    assert execute(run_request, dagster_instance).success
    elapsed = time.monotonic() - started

    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "succeeded"
    result = request.result
    assert (result["items"], result["ok"], result["failed"], result["invalid"]) == (25_005, 24_995, 8, 2)
    assert len(result["upload_ids"]) == 26
    reasons = {f["nm_id"]: f["error"] for f in result["failures"]}
    assert all(reasons[nm] == QUARANTINE_TEXT for nm in cut)
    assert reasons[1_000_000_000] == UNKNOWN_ITEM_TEXT
    assert reasons[42] == "discount must be a whole number from 0 to 99"
    assert reasons[nms[-1]] == "this product appears earlier in the request"
    statuses = dict(
        warehouse_conn.execute(
            "SELECT status, count(*) FROM pricing_bulk_items WHERE request_id = %s GROUP BY 1", (request_id,)
        ).fetchall()
    )
    assert statuses == {"ok": 24_995, "failed": 8, "invalid": 2}

    # WB has the new prices; each chunk became exactly one task, each product was in one task.
    after = selling_at_wb(big, "c1")
    assert all(after[nm] == (before[nm][0] + 10, before[nm][1]) for nm in nms if nm not in cut)
    assert all(after[nm] == before[nm] for nm in cut)
    assert len(writes(big, "price_task")) == 26
    assert max(uploaded_nms(big).values()) == 1
    audit = warehouse_conn.execute(
        "SELECT status, count(*) FROM engine_actions WHERE engine = 'pricing-bulk' AND action = 'upload_prices' "
        "GROUP BY 1"
    ).fetchall()
    assert audit == [("ok", 26)]

    # Re-executed (the UI's Re-execute): nothing is sent again.
    assert execute(run_request, dagster_instance).success
    assert len(writes(big, "price_task")) == 26
    assert elapsed < 60


def test_a_rerun_sends_only_the_chunks_without_results_and_checks_a_sent_one_at_wb(
    small, warehouse_conn, dagster_instance, monkeypatch
):
    before = selling_at_wb(small, "c1")
    items = [{"nm_id": nm, "price": price + 7} for nm, (price, _) in before.items()]
    request_id = outbox.create_request(warehouse_conn, "pricing-bulk", "c1", {"items": items})
    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    api = WbApi(warehouse=warehouse)
    with warehouse.connect() as conn, api.client("c1") as client:
        # The second chunk's task is accepted, then WB stops answering about it.
        original = client.wait_price_task
        calls = []

        def flaky(task_id, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(task_id)
            if len(calls) == 2:
                raise WbUnavailable(cabinet_id="c1", endpoint="prices", attempts=6, last_error="HTTP 503")
            return original(task_id, **kwargs)

        monkeypatch.setattr(client, "wait_price_task", flaky)
        with pytest.raises(WbUnavailable):
            pricing_bulk.run_bulk(conn, client, "c1", request_id, {"items": items}, None)
        assert len(writes(small, "price_task")) == 2
        states = conn.execute("SELECT intent_id, state FROM price_upload_chunks ORDER BY intent_id").fetchall()
        assert states == [(f"pricing-bulk:{request_id}:0", "done"), (f"pricing-bulk:{request_id}:1", "sent")]

        result = pricing_bulk.run_bulk(conn, client, "c1", request_id, {"items": items}, None)
    # Chunk 0 was not touched, chunk 1 was polled (not uploaded again), chunk 2 was uploaded.
    assert len(writes(small, "price_task")) == 3 and max(uploaded_nms(small).values()) == 1
    assert (result["ok"], result["failed"], result["pending"]) == (2_500, 0, 0)
    assert selling_at_wb(small, "c1") == {nm: (price + 7, d) for nm, (price, d) in before.items()}


def test_out_of_range_items_are_invalid_with_their_reason_and_the_rest_go_to_wb(
    small, warehouse_conn, dagster_instance
):
    """Values beyond the columns (and WB) are bad items, not a COPY error that fails the request."""
    before = selling_at_wb(small, "c1")
    good = sorted(before)[:3]
    items = [{"nm_id": nm, "price": before[nm][0] + 3} for nm in good]
    items += [
        {"nm_id": good[0] + 1_000_000, "price": 99_999_999_999},
        {"nm_id": 1e30, "price": 500},
        {"nm_id": good[0] + 2_000_000, "discount": 1e30},
    ]
    request_id = outbox.create_request(warehouse_conn, "pricing-bulk", "c1", {"items": items})
    (run_request,) = evaluate(requests_sensor, dagster_instance)[0].run_requests
    assert execute(run_request, dagster_instance).success

    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "succeeded", request.error
    assert (request.result["ok"], request.result["invalid"]) == (3, 3)
    errors = {f["seq"]: f["error"] for f in request.result["failures"]}
    assert errors[3].startswith("price must be a positive whole number of rubles below")
    assert errors[4].startswith("nm_id must be a positive whole number below")
    assert errors[5] == "discount must be a whole number from 0 to 99"
    assert all(selling_at_wb(small, "c1")[nm][0] == before[nm][0] + 3 for nm in good)


def test_a_permanent_database_error_fails_at_once_naming_its_cause(small, warehouse_conn, dagster_instance):
    """A value PostgreSQL refuses (here a CHECK constraint) fails the same way on every attempt: no
    retries, and the request's error is the database's reason, not a retry counter."""
    warehouse_conn.execute("ALTER TABLE pricing_bulk_items ADD CONSTRAINT no_price_777 CHECK (price <> 777)")
    nm = sorted(selling_at_wb(small, "c1"))[0]
    request_id = outbox.create_request(warehouse_conn, "pricing-bulk", "c1", {"items": [{"nm_id": nm, "price": 777}]})
    (run_request,) = evaluate(requests_sensor, dagster_instance)[0].run_requests
    result = execute(run_request, dagster_instance)
    assert not result.success
    assert [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"] == []
    evaluate(requests_sensor, dagster_instance)  # copies the run's outcome onto the request
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "failed"
    assert "CheckViolation (SQLSTATE 23514)" in request.error and "no_price_777" in request.error
    assert "max_retries" not in request.error
    assert writes(small, "price_task") == []
