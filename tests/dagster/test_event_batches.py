"""A step's materializations are stored together: a sweep records one per feed and changed day, a
ranged РНП run one per partition and table, thousands at 1,000 cabinets, and one INSERT each would
cost the deployment several CPU-milliseconds apiece (dagster_internals.EVENT_BATCH_SIZE)."""

from __future__ import annotations

import os

from dagster import AssetKey, AssetMaterialization, AssetRecordsFilter, DagsterEventType, job, op

import optima_pipelines.definitions  # noqa: F401  (loading the definitions enables the batches)
from optima_pipelines.orchestration.dagster_internals import log_materializations

DAYS = [f"c1|2026-11-{d:02d}" for d in range(1, 21)]


@op
def records_twenty_days(context) -> None:  # type: ignore[no-untyped-def]
    log_materializations(
        context,
        [AssetMaterialization("wb_orders", partition=key, metadata={"rows_inserted": n}) for n, key in enumerate(DAYS)],
    )


@job
def twenty_days() -> None:
    records_twenty_days()


def test_a_steps_materializations_are_stored_in_one_batch_and_read_back_whole(dagster_instance, monkeypatch) -> None:
    assert int(os.environ["DAGSTER_EVENT_BATCH_SIZE"]) >= len(DAYS)
    storage = dagster_instance.event_log_storage
    batches: list[int] = []
    store_event_batch = storage.store_event_batch

    def counted(events):  # type: ignore[no-untyped-def]
        batches.append(len(events))
        return store_event_batch(events)

    monkeypatch.setattr(storage, "store_event_batch", counted)
    result = twenty_days.execute_in_process(instance=dagster_instance)
    assert result.success
    assert batches == [len(DAYS)]

    # The run's event stream and the asset's records both hold every partition, with its metadata.
    logged = [e for e in result.all_events if e.event_type == DagsterEventType.ASSET_MATERIALIZATION]
    assert [e.partition for e in logged] == DAYS
    records = dagster_instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("wb_orders")), limit=100, ascending=True
    ).records
    assert [r.partition_key for r in records] == DAYS
    assert [r.asset_materialization.metadata["rows_inserted"].value for r in records] == list(range(len(DAYS)))
    assert dagster_instance.get_materialized_partitions(AssetKey("wb_orders")) == set(DAYS)
