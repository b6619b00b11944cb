"""Sweeps (jobs/wb_sync.py): one run over many cabinets, each under its cabinet lock, each cabinet's
trouble its own; and the sensors that launch them, a run per window and shard (sensors/wb_sync.py).

In process against the real PostgreSQL and the WB simulator over HTTP."""

from __future__ import annotations

import json
import threading
import time

import pytest
from dagster import build_sensor_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.orchestration.cadences import sweep_priority
from optima_pipelines.orchestration.queues import TAG_CABINET, TAG_SWEEP, TAG_SWEEP_OUTCOME
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.settings import load_settings
from optima_pipelines.sync import inventory
from optima_pipelines.sync.state import get_state
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.cabinet_lock import held
from optima_pipelines.warehouse.cabinets import get_cabinet, get_token
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from tests.wb_syncs import materializations, run_job, served, simulator
from wb_simulator import CabinetSpec
from wb_simulator.tokens import CATEGORY_BITS

CABINETS = ["s1", "s2", "s3", "s4"]
SWEEP = "inventory_sync_sweep"


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    sim = simulator(*(CabinetSpec(id=c, products=12, orders_per_day=30, history_days=10) for c in CABINETS))
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance):
        yield sim


def run_sweep(instance, cabinets, window="w1"):
    job = defs.get_job_def(SWEEP)
    return job.execute_in_process(
        run_config={"ops": {op_name(SWEEP): {"config": {"cabinet_ids": cabinets, "window": window}}}},
        instance=instance,
        tags={"optima/trigger": "schedule"},
        raise_on_error=False,
    )


def outcomes(conn, run_id) -> dict[str, tuple[str, str | None]]:
    rows = conn.execute("SELECT cabinet_id, outcome, reason FROM sweep_outcomes WHERE run_id = %s", (run_id,))
    return {c: (o, r) for c, o, r in rows}


def stocks_rows(conn, cabinet) -> int:
    return conn.execute("SELECT count(*) FROM stocks WHERE cabinet_id = %s", (cabinet,)).fetchone()[0]


def test_one_sweep_syncs_every_cabinet_and_a_revoked_token_and_a_penalty_stay_their_own(
    wb, warehouse_conn, dagster_instance, settings
):
    wb.revoke(get_token(warehouse_conn, TokenCipher(load_key(settings)), "s2"))
    for category in CATEGORY_BITS:  # a pause of days: far beyond what a scheduled call may wait
        wb.penalize("s3", category, 10**9)

    result = run_sweep(dagster_instance, CABINETS)

    assert result.success, "one cabinet's trouble failed the sweep"
    got = outcomes(warehouse_conn, result.run_id)
    assert {c: o for c, (o, _) in got.items()} == {
        "s1": "succeeded",
        "s2": "failed",
        "s3": "deferred",
        "s4": "succeeded",
    }
    assert "401" in got["s2"][1] or "token" in got["s2"][1].lower(), got["s2"]
    assert stocks_rows(warehouse_conn, "s1") > 0 and stocks_rows(warehouse_conn, "s4") > 0
    assert stocks_rows(warehouse_conn, "s2") == 0 and stocks_rows(warehouse_conn, "s3") == 0
    # The revoked token marks its cabinet as a single-cabinet run would; the pause is kept for the resume sensor.
    assert get_cabinet(warehouse_conn, "s2").status == "token_invalid"
    assert get_state(warehouse_conn, "s3", inventory.STATE_FEED).resume_at is not None
    # Each changed partition is materialized with the metadata a single-cabinet run records.
    day = today_moscow()
    mats = materializations(dagster_instance, "stocks")
    assert {f"s1|{day}", f"s4|{day}"} <= set(mats) and not {f"s2|{day}", f"s3|{day}"} & set(mats)
    assert mats[f"s1|{day}"]["trigger"] == "scheduled" and mats[f"s1|{day}"]["rows_inserted"] > 0
    run = dagster_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_SWEEP_OUTCOME] == "succeeded=2 skipped=0 deferred=1 retrying=0 failed=1"
    assert TAG_CABINET not in run.tags
    # The run's log names every cabinet and what it came to.
    lines = [e.message for e in dagster_instance.all_logs(result.run_id) if e.message]
    for cabinet, outcome in (("s1", "succeeded"), ("s2", "failed"), ("s3", "deferred")):
        assert any(f"inventory_sync of {cabinet}: {outcome}" in line for line in lines), (cabinet, lines[-10:])
    # No token in what the run recorded.
    token = get_token(warehouse_conn, TokenCipher(load_key(settings)), "s1")
    assert all(token not in line for line in lines)


def test_a_cabinet_another_run_holds_is_skipped_as_account_busy_and_never_asked(
    wb, warehouse_conn, dagster_instance, monkeypatch, optima_env, database_url
):
    monkeypatch.setenv("OPTIMA_SWEEP_BUSY_WAIT_SECONDS", "1")
    from optima_pipelines.db.connection import connect

    with held(lambda: connect(database_url, f"optima_{optima_env}"), "s1", 1):
        result = run_sweep(dagster_instance, ["s1", "s2"])
    assert result.success
    got = outcomes(warehouse_conn, result.run_id)
    assert got["s1"][0] == "skipped" and "account-busy" in got["s1"][1]
    assert got["s2"][0] == "succeeded"
    assert wb.journal.calls("s1") == [], "the sweep asked WB for a cabinet another run held"
    assert stocks_rows(warehouse_conn, "s1") == 0 and stocks_rows(warehouse_conn, "s2") > 0
    assert dagster_instance.get_run_by_id(result.run_id).tags[TAG_SWEEP_OUTCOME].startswith("succeeded=1 skipped=1")
    # /metrics counts the skip under the queue, as the original counted account-busy.
    from optima_pipelines.operations.metrics import build_registry
    from tests.dagster.test_operations_metrics import sample, scrape

    settings = load_settings()
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    figures = scrape(registry)
    collector.close()
    assert sample(figures, "optima_sweep_cabinets", queue="inventory-sync", outcome="skipped") == 1
    assert sample(figures, "optima_sweep_cabinets", queue="inventory-sync", outcome="succeeded") == 1


def test_a_single_cabinet_run_waits_for_the_cabinet_then_talks_to_wb(
    wb, warehouse_conn, dagster_instance, optima_env, database_url
):
    """A person's run behind another run's work on the cabinet: it waits for the lock, not longer,
    and its first WB call comes after the holder let go."""
    from optima_pipelines.db.connection import connect

    lock = held(lambda: connect(database_url, f"optima_{optima_env}"), "s1", 1)
    released: list[float] = []

    def release() -> None:
        time.sleep(2)
        released.append(time.time())
        lock.close()

    threading.Thread(target=release).start()
    result = run_job("inventory_sync", dagster_instance, "s1")
    assert result.success
    calls = wb.journal.calls("s1")
    assert calls and min(c.started for c in calls) >= released[0]


def test_the_sensor_sweeps_a_window_in_shards_once_and_later_only_what_became_due(
    wb, warehouse_conn, dagster_instance, monkeypatch, settings
):
    from optima_pipelines.sensors.ads import ads_sync_sensor
    from optima_pipelines.warehouse.cabinets import add_cabinet

    monkeypatch.setenv("OPTIMA_SWEEP_SHARD_SIZE", "3")
    with build_sensor_context(instance=dagster_instance, resources=RESOURCES) as context:
        first = ads_sync_sensor(context)
    requests = first.run_requests
    assert [r.job_name for r in requests] == ["ads_sync_sweep", "ads_sync_sweep"]
    shards = [r.run_config["ops"][op_name("ads_sync_sweep")]["config"]["cabinet_ids"] for r in requests]
    assert shards == [["s1", "s2", "s3"], ["s4"]]
    assert all(r.tags[TAG_SWEEP] == "ads_sync_sensor" and TAG_CABINET not in r.tags for r in requests)
    assert all(r.tags["dagster/priority"] == str(sweep_priority("ads_sync_sensor")) for r in requests)
    assert len({r.run_key for r in requests}) == 2
    window = json.loads(first.cursor)["window"]

    # The same window again: nothing new. A cabinet added meanwhile: a run for it alone.
    with build_sensor_context(instance=dagster_instance, resources=RESOURCES, cursor=first.cursor) as context:
        again = ads_sync_sensor(context)
    assert not getattr(again, "run_requests", None)
    add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), "s5", "S5", get_token(
        warehouse_conn, TokenCipher(load_key(settings)), "s1"))  # fmt: skip
    with build_sensor_context(instance=dagster_instance, resources=RESOURCES, cursor=first.cursor) as context:
        later = ads_sync_sensor(context)
    if json.loads(later.cursor)["window"] == window:  # (a window boundary in between starts afresh)
        (extra,) = later.run_requests
        assert extra.run_config["ops"][op_name("ads_sync_sweep")]["config"]["cabinet_ids"] == ["s5"]
        assert extra.run_key not in {r.run_key for r in requests}


def test_wb_trouble_past_the_clients_retries_is_retried_by_a_single_cabinet_run(wb, warehouse_conn, dagster_instance):
    """5xx on every call: the sweep still succeeds (WB's trouble is not the sweep's), each cabinet is
    ``retrying`` with a resume time a minute ahead, and the resume sensor then runs each alone."""
    from datetime import UTC, datetime, timedelta

    from optima_pipelines.jobs.wb_sync import RETRY_AFTER
    from optima_pipelines.sensors.wb_sync import RESUMABLE, plan_resumes
    from optima_pipelines.sync.runs import due_resumes_by_feed

    wb.faults.set("* *", error_rate=1.0)
    before = datetime.now(UTC)
    result = run_sweep(dagster_instance, ["s1", "s2"])
    assert result.success
    got = outcomes(warehouse_conn, result.run_id)
    assert {c: o for c, (o, _) in got.items()} == {"s1": "retrying", "s2": "retrying"}
    for cabinet in ("s1", "s2"):
        resume_at = get_state(warehouse_conn, cabinet, inventory.STATE_FEED).resume_at
        assert before + RETRY_AFTER <= resume_at <= datetime.now(UTC) + RETRY_AFTER
    due = due_resumes_by_feed(warehouse_conn, list(RESUMABLE), datetime.now(UTC) + timedelta(minutes=2))
    launches = plan_resumes(due, ["s1", "s2"], set(), {})
    assert sorted((c, r.job.name) for c, r, _ in launches) == [("s1", "inventory_sync"), ("s2", "inventory_sync")]


def test_a_sweep_still_running_holds_only_the_cabinets_it_is_not_done_with(wb, warehouse_conn, dagster_instance):
    """The last window's sweep waits out one cabinet's WB pause: the cabinets it is done with are due
    again in the next window; the one it still works on is not swept twice."""
    import uuid

    from dagster import DagsterRun, DagsterRunStatus

    from optima_pipelines.sensors.ads import ads_sync_sensor

    sweep = "ads_sync_sweep"
    running = DagsterRun(
        job_name=sweep,
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.STARTED,
        run_config={"ops": {op_name(sweep): {"config": {"cabinet_ids": ["s1", "s2", "s3"], "window": "w0"}}}},
    )
    dagster_instance.add_run(running)
    warehouse_conn.execute(
        "INSERT INTO sweep_outcomes (run_id, job, queue, cabinet_id, outcome) VALUES"
        " (%(run)s, %(job)s, 'rnp-ads-sync', 's1', 'succeeded'), (%(run)s, %(job)s, 'rnp-ads-sync', 's2', 'failed')",
        {"run": running.run_id, "job": sweep},
    )

    with build_sensor_context(instance=dagster_instance, resources=RESOURCES) as context:
        result = ads_sync_sensor(context)
    launched = [c for r in result.run_requests for c in r.run_config["ops"][op_name(sweep)]["config"]["cabinet_ids"]]
    assert sorted(launched) == ["s1", "s2", "s4"]
