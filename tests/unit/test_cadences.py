"""The cadence registry is the one list of every schedule and sensor, and definitions.py follows it."""

from optima_pipelines.cadences import cadences
from optima_pipelines.definitions import defs


def test_every_schedule_and_sensor_is_registered_with_its_cadence():
    repo = defs.get_repository_def()
    registry = {c.name: c for c in cadences()}
    schedules = {s.name: s for s in repo.schedule_defs}
    sensors = {s.name: s for s in repo.sensor_defs}
    assert set(registry) == set(schedules) | set(sensors)
    for name, schedule in schedules.items():
        entry = registry[name]
        assert (schedule.cron_schedule, schedule.execution_timezone) == (entry.cadence, entry.timezone), name
        assert schedule.job_name == entry.job, name
    for name, sensor in sensors.items():
        entry = registry[name]
        assert entry.kind != "cron", name
        targets = {t.job_name for t in sensor.targets} if sensor.targets else set()
        if entry.job is not None:
            assert entry.job in targets, (name, targets)


def test_original_cron_cadences_are_kept():
    by_name = {c.name: c for c in cadences()}
    assert (by_name["digitization_backfill_schedule"].cadence, by_name["digitization_backfill_schedule"].timezone) == (
        "0 3 * * *",
        "Europe/Moscow",
    )
    assert (by_name["rnp_merge_sync"].cadence, by_name["rnp_merge_sync"].timezone) == ("0 6 * * *", "Europe/Moscow")
    assert (by_name["partition_manager_weekly"].cadence, by_name["partition_manager_weekly"].timezone) == (
        "0 3 * * 1",
        "UTC",
    )
    assert by_name["digitization_increment_sensor"].interval_seconds == 1800
