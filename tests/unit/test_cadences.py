"""The cadence registry (orchestration/cadences.py) is the original's schedule table (DESIGN.md §2) and what Dagster runs."""

from __future__ import annotations

import re

import pytest
from dagster import ScheduleDefinition, SensorDefinition

from optima_pipelines.orchestration.cadences import cadences

#: DESIGN.md §2 / issue 5, the cadence of each sync queue: (queue, job) → (kind, cadence, timezone). The
#: per-cabinet cadences launch sweeps (one run per window over many cabinets, jobs/wb_sync.py).
SYNC_TABLE = {
    ("digitization-sync", "digitization_increment_sweep"): ("interval", "every 30 min", "Europe/Moscow"),
    ("digitization-sync", "digitization_backfill_sweep"): ("cron", "0 3 * * *", "Europe/Moscow"),
    ("rnp-finance-sync", "finance_sync_sweep"): ("cron", "0 5 * * *", "Europe/Moscow"),
    ("rnp-ads-sync", "ads_sync_sweep"): ("interval", "every 5 min", "Europe/Moscow"),
    ("rnp-sections-sync", "funnel_sync_sweep"): ("interval", "every 1 h", "Europe/Moscow"),
    ("catalog-sync", "catalog_cards_sync_sweep"): ("cron", "0 4 * * *", "Europe/Moscow"),
    ("catalog-sync", "catalog_prices_sync_sweep"): ("interval", "every 30 min", "Europe/Moscow"),
    ("inventory-sync", "inventory_sync_sweep"): ("cron", "0 * * * *", "Europe/Moscow"),
    ("kb-wb-news-sync", "news_sync"): ("cron", "15 */3 * * *", "Europe/Moscow"),
}
#: On demand, through request kinds: kind → (job, queue).
ON_DEMAND = {
    "autobidder-sync": ("autobidder_sync", "autobidder-sync"),
    "import-user-report": ("finance_report_import", "digitization-sync"),
    "import-user-feeds": ("digitization_import", "digitization-sync"),
    "catalog-sync": ("catalog_full_sync", "catalog-sync"),
}
#: Cadence windows (how long a scheduled run may wait behind a busy cabinet before it is skipped).
WINDOWS = {"ads_sync_sweep": 300, "finance_sync_sweep": 6 * 3600, "digitization_backfill_sweep": 3 * 3600}


@pytest.fixture(scope="module")
def registered():
    from optima_pipelines.definitions import defs

    repo = defs.get_repository_def()
    return {d.name: d for d in [*repo.schedule_defs, *repo.sensor_defs]}


def test_every_sync_of_the_table_has_its_cadence():
    by_job = {(c.queue, c.job): c for c in cadences()}
    for (queue, job), (kind, cadence, timezone) in SYNC_TABLE.items():
        entry = by_job.get((queue, job))
        assert entry is not None, f"{queue} / {job} has no cadence"
        assert (entry.kind, entry.timezone) == (kind, timezone), entry
        if kind == "cron":
            assert entry.cadence == cadence, entry
        else:
            number, unit = cadence.removeprefix("every ").split()
            assert entry.interval_seconds == int(number) * {"min": 60, "h": 3600}[unit], entry
    for job, window in WINDOWS.items():
        assert next(c for c in cadences() if c.job == job).window_seconds == window


def test_the_registry_is_what_definitions_register(registered):
    entries = {c.name: c for c in cadences()}
    assert set(entries) == set(registered), (
        "every schedule and sensor is declared in orchestration/cadences.py, and only those"
    )
    for name, entry in entries.items():
        definition = registered[name]
        if entry.kind == "cron":
            assert isinstance(definition, ScheduleDefinition), name
            assert (definition.cron_schedule, definition.execution_timezone) == (entry.cadence, entry.timezone), name
        else:
            assert isinstance(definition, SensorDefinition), name
            assert definition.minimum_interval_seconds <= (entry.interval_seconds or 30), name
        if entry.job is not None:
            assert definition.job_name == entry.job, name


def test_on_demand_work_has_a_request_handler_with_its_job_and_queue():
    from optima_pipelines.sensors.requests import HANDLERS

    assert ON_DEMAND.items() <= {kind: (h.job.name, h.queue) for kind, h in HANDLERS.items()}.items()


def test_the_requests_sensor_serves_exactly_the_declared_kinds():
    """A kind declared in warehouse/requests.py but served by no handler would fail every request of
    it as unknown; a handler of an undeclared kind is a kind typed somewhere else."""
    from optima_pipelines.sensors.requests import HANDLERS
    from optima_pipelines.warehouse.requests import KINDS

    assert sorted(HANDLERS) == sorted(KINDS)


def test_the_sync_queues_are_tagged_for_the_concurrency_limit():
    from optima_pipelines.orchestration.queues import QUEUES

    sync = {q.name for q in QUEUES.values() if q.sync}
    assert sync == {
        "digitization-sync",
        "rnp-ads-sync",
        "rnp-finance-sync",
        "inventory-sync",
        "catalog-sync",
        "autobidder-sync",
    }
    scheduled = {c.queue for c in cadences() if c.job}
    assert {"rnp-sections-sync", "kb-wb-news-sync"} <= scheduled - sync


def test_the_mart_and_maintenance_keep_the_originals_crons():
    by_name = {c.name: c for c in cadences()}
    assert (by_name["rnp_merge_sync"].cadence, by_name["rnp_merge_sync"].timezone) == ("0 6 * * *", "Europe/Moscow")
    assert (by_name["partition_manager_weekly"].cadence, by_name["partition_manager_weekly"].timezone) == (
        "0 3 * * 1",
        "UTC",
    )


def test_automations_named_stopped_start_stopped_in_the_deployment():
    """A staging copy stops its engines (they would act on WB): every sensor and schedule obeys."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json; from optima_pipelines.definitions import defs; repo = defs.get_repository_def(); "
        "print(json.dumps({d.name: d.default_status.value for d in [*repo.schedule_defs, *repo.sensor_defs]}))"
    )

    def statuses(stopped: str) -> dict[str, str]:
        env = {**os.environ, "OPTIMA_AUTOMATIONS_STOPPED": stopped}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    engines = "autobidder_*,booking_slot_monitor,repricer_sensor,autoreply_sync_sensor,ab_test_metrics_schedule"
    with_engines_off = statuses(engines)
    off = {name for name, status in with_engines_off.items() if status == "STOPPED"}
    # The template schedule is stopped in every deployment; the rest run unless named.
    assert off == {
        "autobidder_bid_engine_sensor",
        "booking_slot_monitor",
        "repricer_sensor",
        "autoreply_sync_sensor",
        "ab_test_metrics_schedule",
        "cabinet_status_summary_schedule",
    }
    assert set(statuses("*").values()) == {"STOPPED"}


@pytest.mark.parametrize("value", ["autobider_*", "repricer", "ads_sync_sensor, nope"])
def test_a_stopped_automation_that_names_nothing_is_a_clear_error(monkeypatch, value):
    from optima_pipelines.errors import ConfigError
    from optima_pipelines.orchestration.cadences import sensor_status

    monkeypatch.setenv("OPTIMA_AUTOMATIONS_STOPPED", value)
    with pytest.raises(ConfigError, match=r"OPTIMA_AUTOMATIONS_STOPPED: '.*' names no sensor or schedule"):
        sensor_status("requests_sensor")


def test_a_cadence_scale_runs_every_per_cabinet_interval_cadence_that_much_more_often(monkeypatch):
    """A load drill (bench/scale.py) compresses the increment, ads, funnel, prices and auto-replies
    alike; the other sensors keep their ticks, the crons their times."""
    real = {c.name: c for c in cadences()}
    monkeypatch.setenv("OPTIMA_CADENCE_SCALE", "10")
    scaled = {c.name: c for c in cadences()}
    changed = {
        n
        for n in real
        if (real[n].interval_seconds, real[n].window_seconds) != (scaled[n].interval_seconds, scaled[n].window_seconds)
    }
    assert changed == {
        "digitization_increment_sensor",
        "ads_sync_sensor",
        "funnel_sync_sensor",
        "catalog_prices_sensor",
        "autoreply_sync_sensor",
        "feed_freshness_sensor",
    }
    # The freshness checks tick twice the shortest feed window (the ads'), at most every minute.
    assert (real["feed_freshness_sensor"].interval_seconds, scaled["feed_freshness_sensor"].interval_seconds) == (
        60,
        15,
    )
    for name in changed - {"feed_freshness_sensor"}:
        assert scaled[name].interval_seconds == real[name].interval_seconds // 10, name
        assert scaled[name].window_seconds == real[name].window_seconds // 10, name
    assert scaled["ads_sync_sensor"].cadence == "every 30 s"
    assert scaled["funnel_sync_sensor"].cadence == "every 6 min"
    assert {n: c.cadence for n, c in scaled.items() if c.kind == "cron"} == {
        n: c.cadence for n, c in real.items() if c.kind == "cron"
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("16", "would run ads_sync_sensor every 18.8 s; its interval of 300 s allows a scale of at most 15"),
        ("0.5", "OPTIMA_CADENCE_SCALE must be at least 1, got 0.5"),
        ("fast", "OPTIMA_CADENCE_SCALE must be a number, got 'fast'"),
    ],
)
def test_a_cadence_scale_that_cannot_hold_is_a_clear_error(monkeypatch, value, message):
    from optima_pipelines.errors import ConfigError

    monkeypatch.setenv("OPTIMA_CADENCE_SCALE", value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        cadences()


def test_every_interval_sensor_ticks_at_least_twice_a_window(monkeypatch):
    """Under the daemon a tick comes a little later than ``minimum_interval_seconds``: a sensor
    ticking once a window would leave windows without a run."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json; from optima_pipelines.definitions import defs; repo = defs.get_repository_def(); "
        "print(json.dumps({d.name: d.minimum_interval_seconds for d in repo.sensor_defs}))"
    )
    env = {**os.environ, "OPTIMA_CADENCE_SCALE": "10"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    ticks = json.loads(out.stdout.strip().splitlines()[-1])
    monkeypatch.setenv("OPTIMA_CADENCE_SCALE", "10")
    for c in cadences():
        if c.window_seconds and c.kind == "interval" and not c.on_demand:  # on demand: judged by its runs
            assert ticks[c.name] <= c.window_seconds / 2, (c.name, ticks[c.name], c.window_seconds)


def test_a_scheduled_single_cabinet_run_waits_no_longer_than_its_sweep_would():
    """The account-busy sensor's windows: a sweep's, and its single-cabinet job's (a resume, or a
    run launched with the schedule's tags) the same: such runs are cancelled past it too."""
    from optima_pipelines.sensors.queue import windows_by_job

    windows = windows_by_job()
    assert windows["ads_sync_sweep"] == windows["ads_sync"] == 300
    assert windows["digitization_increment"] == windows["digitization_increment_sweep"]
    assert windows["finance_sync"] == 6 * 3600


def test_the_shorter_a_cadences_window_the_sooner_its_sweeps_leave_the_queue():
    from optima_pipelines.orchestration.cadences import sweep_priority
    from optima_pipelines.orchestration.queues import PRIORITY_REAGGREGATE, PRIORITY_SCHEDULED, PRIORITY_USER

    ads, increment, funnel = (
        sweep_priority(n) for n in ("ads_sync_sensor", "digitization_increment_sensor", "funnel_sync_sensor")
    )
    assert PRIORITY_USER > ads > increment > funnel >= PRIORITY_SCHEDULED > PRIORITY_REAGGREGATE
    assert sweep_priority("finance_sync_schedule") == PRIORITY_SCHEDULED  # a cron
