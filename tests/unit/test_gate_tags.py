"""The run coordinator's tagging rule, as a pure function, and its run-queue limits (the daemon test
proves both end to end)."""

import pytest

from optima_pipelines.orchestration.queues import (
    PRIORITY_SCHEDULED,
    PRIORITY_USER,
    TAG_CABINET,
    TAG_LANE,
    TAG_QUEUE,
    TAG_QUEUE_CLASS,
    TAG_SERIAL_QUEUE,
    TAG_TRIGGER,
    queue_tags,
    sweep_tags,
)
from optima_pipelines.orchestration.run_coordinator import MULTI_CABINET, derive_gate_tags


def test_single_partition_run_is_gated_by_its_cabinet():
    # A person's materialization of one partition (the UI, the CLI): the user lane, outside the sync
    # queues' limit that sweeps share.
    tags = {"dagster/partition/cabinet": "c1", "dagster/partition/date": "2026-11-29", TAG_QUEUE: "digitization-sync"}
    assert derive_gate_tags(tags, []) == {TAG_CABINET: "c1", TAG_LANE: "user"}


def test_what_schedules_and_sensors_launch_is_scheduled_and_shares_the_sync_limit():
    sweep = sweep_tags("rnp-ads-sync", cadence="ads", window="7", shard="1/2", cabinets=40)
    assert sweep[TAG_LANE] == "scheduled" and sweep[TAG_QUEUE_CLASS] == "sync" and TAG_CABINET not in sweep
    assert derive_gate_tags(sweep, []) == {}
    # A job's own tags carry no lane: a schedule's run of it gets the scheduled lane on submit...
    job_tags = queue_tags("digitization-sync")
    scheduled = {**job_tags, "dagster/schedule_name": "nightly", "dagster/partition/cabinet": "c1"}
    assert derive_gate_tags(scheduled, []) == {TAG_CABINET: "c1", TAG_LANE: "scheduled", TAG_QUEUE_CLASS: "sync"}
    # ...and a person's launch of the same job the user lane.
    assert derive_gate_tags({**job_tags, TAG_TRIGGER: "manual", "dagster/partition/cabinet": "c1"}, []) == {
        TAG_CABINET: "c1",
        TAG_LANE: "user",
    }
    assert queue_tags("rnp-ads-sync", cabinet_id="c1", priority=PRIORITY_SCHEDULED)[TAG_LANE] == "scheduled"


def test_a_request_is_in_the_user_lane_although_a_sensor_launches_it():
    tags = {
        **queue_tags("digitization-sync", cabinet_id="c1", priority=PRIORITY_USER),
        TAG_TRIGGER: "user",
        "dagster/sensor_name": "requests_sensor",
    }
    assert tags[TAG_LANE] == "user" and TAG_QUEUE_CLASS not in tags
    assert derive_gate_tags(tags, []) == {}


def test_ranged_run_over_one_cabinet_is_gated_by_it():
    tags = {
        TAG_QUEUE: "digitization-sync",
        "dagster/asset_partition_range_start": "c1|2026-11-01",
        "dagster/asset_partition_range_end": "c1|2026-11-30",
    }
    assert derive_gate_tags(tags, [])[TAG_CABINET] == "c1"


def test_ranged_run_over_several_cabinets_is_gated_as_multi():
    tags = {
        TAG_QUEUE: "digitization-sync",
        "dagster/asset_partition_range_start": "c1|2026-11-01",
        "dagster/asset_partition_range_end": "c2|2026-11-01",
    }
    assert derive_gate_tags(tags, [])[TAG_CABINET] == MULTI_CABINET


def test_runs_that_do_not_talk_to_wb_are_not_gated():
    extra = derive_gate_tags({TAG_QUEUE: "rnp-merge-sync", "dagster/partition/cabinet": "c1"}, [])
    assert TAG_CABINET not in extra
    assert extra[TAG_SERIAL_QUEUE] == "rnp-merge-sync"


def test_queue_is_derived_from_assets_when_untagged():
    assert derive_gate_tags({}, ["cabinet_status_summary"]) == {TAG_QUEUE: "example-jobs", TAG_LANE: "user"}


def test_unknown_work_is_left_alone():
    assert derive_gate_tags({}, ["something_else"]) == {}


def test_job_launched_with_op_config_is_gated_by_its_cabinet():
    run_config = {"ops": {"digitization_increment": {"config": {"cabinet_id": "c7"}}}}
    extra = derive_gate_tags({TAG_QUEUE: "digitization-sync"}, [], run_config)
    assert extra[TAG_CABINET] == "c7"


def test_wb_job_without_a_cabinet_is_gated_as_multi():
    assert derive_gate_tags({TAG_QUEUE: "digitization-sync"}, [], {})[TAG_CABINET] == MULTI_CABINET


def _queue_config(monkeypatch, **env: str):  # type: ignore[no-untyped-def]
    """The run queue the daemon would use with dagster.yaml's limits and these variables."""
    from pathlib import Path

    import yaml

    from optima_pipelines.orchestration.run_coordinator import OptimaRunCoordinator

    for name in ("SYNC_QUEUE_CONCURRENCY", "OPTIMA_MAX_CONCURRENT_RUNS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "dagster.yaml").read_text())
    config = OptimaRunCoordinator(**shipped["run_coordinator"]["config"]).get_run_queue_config()

    def limit(key: str, value: str) -> list[int]:
        return [
            item["limit"] for item in config.tag_concurrency_limits if (item["key"], item.get("value")) == (key, value)
        ]

    return (
        config.max_concurrent_runs,
        limit("optima/queue-class", "sync"),
        limit("optima/lane", "user"),
        limit("optima/lane", "scheduled"),
    )


def test_the_run_queue_limits_follow_the_environment_over_dagster_yaml(monkeypatch):
    # 8 runs at once: the user lane keeps 2 of them, the scheduled lane the other 6, 5 of those for sweeps.
    assert _queue_config(monkeypatch) == (8, [5], [2], [6])
    assert _queue_config(monkeypatch, SYNC_QUEUE_CONCURRENCY="8", OPTIMA_MAX_CONCURRENT_RUNS="12") == (
        12,
        [8],
        [2],
        [10],
    )


def test_a_bad_run_queue_limit_is_a_clear_error(monkeypatch):
    from optima_pipelines.errors import ConfigError

    with pytest.raises(ConfigError, match="OPTIMA_MAX_CONCURRENT_RUNS must be an integer, got 'many'"):
        _queue_config(monkeypatch, OPTIMA_MAX_CONCURRENT_RUNS="many")
