"""Inside a real run, our log lines carry the run id and the cabinet of the partition, in the event log too."""

import logging

from dagster import AssetExecutionContext, DagsterEventType, asset, materialize

from optima_pipelines import logs
from optima_pipelines.partitions import CABINET_DAY, CABINETS_NAME

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJsb2dzLXRlc3QifQ.c2lnbmF0dXJl"
logger = logs.get_logger("tests.ops_logs_asset")


@asset(partitions_def=CABINET_DAY)
def logging_feed(context: AssetExecutionContext) -> None:
    logger.info("fetched rows with token %s", TOKEN)
    context.log.info(f"context.log also redacts {TOKEN}")


def test_run_lines_carry_run_id_and_cabinet_and_no_token(dagster_instance, caplog):
    logs.install()
    dagster_instance.add_dynamic_partitions(CABINETS_NAME, ["shop-3"])
    with caplog.at_level(logging.INFO):
        result = materialize([logging_feed], instance=dagster_instance, partition_key="shop-3|2026-11-20")
    assert result.success
    ours = [r for r in caplog.records if r.name == "optima_pipelines.tests.ops_logs_asset"]
    assert [(r.run_id, r.cabinet) for r in ours] == [(result.run_id, "shop-3")]
    assert TOKEN not in caplog.text

    # The run's event log (what the UI shows) has both lines, redacted.
    messages = [
        r.event_log_entry.user_message
        for r in dagster_instance.get_records_for_run(result.run_id).records
        if r.event_log_entry.dagster_event is None
        or r.event_log_entry.dagster_event_type == DagsterEventType.LOGS_CAPTURED
    ]
    text = "\n".join(messages)
    assert "fetched rows with token <redacted>" in text
    assert "context.log also redacts <redacted>" in text
    assert TOKEN not in text
