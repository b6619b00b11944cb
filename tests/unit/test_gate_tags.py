"""The run coordinator's tagging rule, as a pure function (the daemon test proves it end to end)."""

from optima_pipelines.queues import TAG_CABINET, TAG_QUEUE, TAG_QUEUE_CLASS, TAG_SERIAL_QUEUE
from optima_pipelines.run_coordinator import MULTI_CABINET, derive_gate_tags


def test_single_partition_run_is_gated_by_its_cabinet():
    tags = {"dagster/partition/cabinet": "c1", "dagster/partition/date": "2026-11-29", TAG_QUEUE: "digitization-sync"}
    assert derive_gate_tags(tags, []) == {TAG_CABINET: "c1", TAG_QUEUE_CLASS: "sync"}


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
    assert derive_gate_tags({}, ["cabinet_status_summary"]) == {TAG_QUEUE: "example-jobs"}


def test_unknown_work_is_left_alone():
    assert derive_gate_tags({}, ["something_else"]) == {}


def test_job_launched_with_op_config_is_gated_by_its_cabinet():
    run_config = {"ops": {"digitization_increment": {"config": {"cabinet_id": "c7"}}}}
    extra = derive_gate_tags({TAG_QUEUE: "digitization-sync"}, [], run_config)
    assert extra[TAG_CABINET] == "c7"


def test_wb_job_without_a_cabinet_is_gated_as_multi():
    assert derive_gate_tags({TAG_QUEUE: "digitization-sync"}, [], {})[TAG_CABINET] == MULTI_CABINET
