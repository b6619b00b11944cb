"""The cron cadences' catch-up (sensors/wb_sync.py's cron_catchup_sensor): a cabinet the hourly or
nightly tick left out, or its sweep skipped as account-busy, is swept again once it is free, within
the cadence's window and in the window's own runs, once; never for a stopped schedule.

In process against the real PostgreSQL and the WB simulator over HTTP; the schedule's state and its
tick are stored as the daemon stores them (dagster_internals.schedule_tick_evaluated reads them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from dagster import build_sensor_context
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteInstigatorOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import (
    InstigatorState,
    InstigatorStatus,
    InstigatorType,
    ScheduleInstigatorData,
    TickData,
    TickStatus,
)

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.orchestration.cadences import cadence
from optima_pipelines.orchestration.dagster_internals import latest_cron_tick
from optima_pipelines.orchestration.queues import TAG_CABINET, TAG_WINDOW
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.sensors.catchup import cron_sweep_catchup_sensor
from optima_pipelines.sensors.wb_sync import tick_window
from optima_pipelines.warehouse.cabinet_lock import held
from tests.dagster.test_sweeps import CABINETS, SWEEP, outcomes, wb  # noqa: F401  (wb: the fixture)
from tests.wb_syncs import run_job

SCHEDULE = "inventory_sync_schedule"  # hourly, a window of an hour: the current hour's tick is always in it


def store_tick(
    instance,
    name: str,
    at: datetime,
    run_ids: list[str] | None = None,
    status: InstigatorStatus = InstigatorStatus.DECLARED_IN_CODE,
):
    """The schedule's state and its evaluated tick of ``at`` (it launched ``run_ids``, or none), as
    the scheduler daemon stores them."""
    origin = RemoteInstigatorOrigin(
        RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("optima_pipelines"), "__repository__"), name
    )
    entry = cadence(name)
    state = InstigatorState(
        origin, InstigatorType.SCHEDULE, status, ScheduleInstigatorData(entry.cadence, at.timestamp())
    )
    instance.add_instigator_state(state)
    instance.create_tick(
        TickData(
            instigator_origin_id=state.instigator_origin_id,
            instigator_name=name,
            instigator_type=InstigatorType.SCHEDULE,
            status=TickStatus.SUCCESS if run_ids else TickStatus.SKIPPED,
            timestamp=at.timestamp(),
            selector_id=state.selector_id,
            run_ids=run_ids or [],
            skip_reason=None if run_ids else "nothing to launch",
        )
    )


def tick_now() -> datetime:
    entry = cadence(SCHEDULE)
    return latest_cron_tick(entry.cadence, datetime.now(UTC), entry.timezone)


def sweep_of_window(instance, cabinets: list[str], window: str):
    """The schedule's sweep run of ``window``, executed here (its tags as the schedule gives them)."""
    return defs.get_job_def(SWEEP).execute_in_process(
        run_config={"ops": {op_name(SWEEP): {"config": {"cabinet_ids": cabinets, "window": window}}}},
        instance=instance,
        tags={"optima/trigger": "schedule", TAG_WINDOW: window},
        raise_on_error=False,
    )


def catch_up(instance):
    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        return cron_sweep_catchup_sensor(context)


def swept(result) -> list[list[str]]:
    return [r.run_config["ops"][op_name(SWEEP)]["config"]["cabinet_ids"] for r in getattr(result, "run_requests", [])]


def test_a_cabinet_skipped_as_account_busy_is_swept_again_in_the_same_window_once_it_is_free(
    wb,  # noqa: F811
    warehouse_conn,
    dagster_instance,
    monkeypatch,
    optima_env,
    database_url,
):
    from optima_pipelines.db.connection import connect
    from optima_pipelines.sensors import wb_sync

    monkeypatch.setenv("OPTIMA_SWEEP_BUSY_WAIT_SECONDS", "1")
    tick = tick_now()
    window = tick_window(tick)
    with held(lambda: connect(database_url, f"optima_{optima_env}"), "s2", 1):
        first = sweep_of_window(dagster_instance, CABINETS, window)
    assert first.success
    store_tick(dagster_instance, SCHEDULE, tick, [first.run_id])
    assert outcomes(warehouse_conn, first.run_id)["s2"][0] == "skipped"
    # The window's sweep ran just now: the catch-up lets it be for CATCHUP_PAUSE.
    waiting = catch_up(dagster_instance)
    assert swept(waiting) == [] and "less than" in waiting.skip_message

    monkeypatch.setattr(wb_sync, "CATCHUP_PAUSE", timedelta(0))
    result = catch_up(dagster_instance)
    (request,) = result.run_requests
    assert swept(result) == [["s2"]], "only the cabinet the window has not done"
    assert request.tags[TAG_WINDOW] == window and request.job_name == SWEEP
    assert request.run_key == f"{SWEEP}:{window}:1", "the window's next run key: the tick's sweep was :0"

    again = defs.get_job_def(SWEEP).execute_in_process(
        run_config=request.run_config, instance=dagster_instance, tags=request.tags, raise_on_error=False
    )
    assert again.success and outcomes(warehouse_conn, again.run_id)["s2"][0] == "succeeded"
    assert swept(catch_up(dagster_instance)) == [], "the window is done with every cabinet"


def test_a_cabinet_left_out_of_the_tick_is_swept_when_due_and_one_synced_alone_since_is_not(
    wb,  # noqa: F811
    warehouse_conn,
    dagster_instance,
    monkeypatch,
):
    from optima_pipelines.sensors import wb_sync

    monkeypatch.setattr(wb_sync, "CATCHUP_PAUSE", timedelta(0))
    tick = tick_now()
    window = tick_window(tick)
    # The tick swept s1 only (the others were busy then); since, s3 was synced alone (a resume).
    first = sweep_of_window(dagster_instance, ["s1"], window)
    assert first.success
    store_tick(dagster_instance, SCHEDULE, tick, [first.run_id])
    # (the coordinator tags every single-cabinet run with its cabinet on submit; here, in process, by hand)
    assert run_job("inventory_sync", dagster_instance, "s3", tags={TAG_CABINET: "s3"}).success

    assert sorted(c for shard in swept(catch_up(dagster_instance)) for c in shard) == ["s2", "s4"]


def test_no_catch_up_before_the_schedule_evaluated_its_tick_nor_for_a_stopped_schedule(
    wb,  # noqa: F811
    dagster_instance,
):
    result = catch_up(dagster_instance)
    assert swept(result) == [] and "not evaluated" in result.skip_message

    store_tick(dagster_instance, SCHEDULE, tick_now(), status=InstigatorStatus.STOPPED)
    assert swept(catch_up(dagster_instance)) == []


@pytest.mark.parametrize(
    ("now", "window"),
    [
        # 05:00 in Moscow is 02:00 UTC; a tick at exactly now is the latest.
        (datetime(2026, 12, 5, 2, 0, tzinfo=UTC), "2026-12-05T05:00"),
        (datetime(2026, 12, 5, 7, 59, tzinfo=UTC), "2026-12-05T05:00"),
        (datetime(2026, 12, 5, 1, 59, tzinfo=UTC), "2026-12-04T05:00"),
    ],
)
def test_a_window_is_named_by_the_finance_tick_in_moscow_time_its_schedule_names_it_by(now, window):
    entry = cadence("finance_sync_schedule")
    assert tick_window(latest_cron_tick(entry.cadence, now, entry.timezone)) == window


def test_a_nightly_window_is_caught_up_until_it_ends_and_not_after(
    wb,  # noqa: F811
    dagster_instance,
    monkeypatch,
):
    from optima_pipelines.sensors import wb_sync

    entry = cadence("finance_sync_schedule")  # 05:00 Moscow, a window of 6 h
    tick = latest_cron_tick(entry.cadence, datetime.now(UTC), entry.timezone)
    # The nightly tick launched nothing (every cabinet was busy then).
    store_tick(dagster_instance, entry.name, tick)

    def at(moment: datetime):
        class Clock(datetime):
            @classmethod
            def now(cls, tz=None):  # type: ignore[override]
                return moment.astimezone(tz)

        monkeypatch.setattr(wb_sync, "datetime", Clock)
        result = catch_up(dagster_instance)
        return sorted(
            c
            for r in getattr(result, "run_requests", [])
            if r.job_name == entry.job
            for c in r.run_config["ops"][op_name(entry.job)]["config"]["cabinet_ids"]
        )

    window = timedelta(seconds=entry.window_seconds or 0)
    assert at(tick + window - timedelta(minutes=1)) == CABINETS, "the window's last minute still catches up"
    assert at(tick + window) == [], "the window has ended: the cabinets wait for the next night's tick"
