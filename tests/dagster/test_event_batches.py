"""A step's materializations are stored together: a sweep records one per feed and changed day, a
ranged РНП run one per partition and table, thousands at 1,000 cabinets, and one INSERT each would
cost the deployment several CPU-milliseconds apiece (dagster_internals.EVENT_BATCH_SIZE)."""

from __future__ import annotations

import os

import sqlalchemy as sa
from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSpec,
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetSelection,
    DagsterEventType,
    DailyPartitionsDefinition,
    Definitions,
    Output,
    asset,
    define_asset_job,
    job,
    multi_asset_check,
    op,
)
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable

import optima_pipelines.definitions  # noqa: F401  (loading the definitions enables the batches)
from optima_pipelines.orchestration.dagster_internals import log_materializations
from optima_pipelines.partitions import RANGE_END_TAG, RANGE_START_TAG

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


PLANNED_DAYS = DailyPartitionsDefinition(start_date="2026-11-01", end_date="2026-11-21")


@asset(partitions_def=PLANNED_DAYS)
def planned_a() -> None: ...


@asset(partitions_def=PLANNED_DAYS)
def planned_b() -> None: ...


def test_a_ranged_runs_planned_partitions_are_stored_in_one_batch_each_partition_marked(
    dagster_instance, monkeypatch
) -> None:
    """Creating a run over a range (the re-aggregation sensor's, a backfill's) announces every asset ×
    partition as planned: the UI marks each in progress, then failed if the run fails. Stored one by
    one they held the daemon 7-15 s per 1,000-cabinet run; they go in one INSERT now."""
    job_def = Definitions(
        assets=[planned_a, planned_b], jobs=[define_asset_job("planned_both", partitions_def=PLANNED_DAYS)]
    ).resolve_job_def("planned_both")
    storage = dagster_instance.event_log_storage
    one_by_one: list[str] = []
    store_event = storage.store_event

    def counted(event):  # type: ignore[no-untyped-def]
        one_by_one.append(event.dagster_event_type)
        return store_event(event)

    monkeypatch.setattr(storage, "store_event", counted)
    run = dagster_instance.create_run_for_job(
        job_def,
        tags={RANGE_START_TAG: "2026-11-01", RANGE_END_TAG: "2026-11-20"},
    )
    assert DagsterEventType.ASSET_MATERIALIZATION_PLANNED not in one_by_one

    planned = dagster_instance.get_records_for_run(
        run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=1000
    ).records
    days = [f"2026-11-{d:02d}" for d in range(1, 21)]
    by_asset = {
        key: sorted(r.event_log_entry.dagster_event.partition for r in planned if r.asset_key == AssetKey(key))
        for key in ("planned_a", "planned_b")
    }
    assert by_asset == {"planned_a": days, "planned_b": days}
    # Each asset's row names the run as its latest planned one (what the UI's asset page reads).
    for key in ("planned_a", "planned_b"):
        info = dagster_instance.get_latest_planned_materialization_info(AssetKey(key))
        assert info is not None and info.run_id == run.run_id


# As the mart's checks (assets/rnp.py): a check per partition of the asset's own partitions.
@asset(
    partitions_def=PLANNED_DAYS,
    check_specs=[AssetCheckSpec("non_negative", asset="checked", partitions_def=PLANNED_DAYS)],
)
def checked():  # type: ignore[no-untyped-def]
    yield Output(None)
    yield AssetCheckResult(passed=True)


def _check_rows(dagster_instance, run_id: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    table = AssetCheckExecutionsTable
    columns = [c for c in table.c if c.name not in ("id", "create_timestamp")]  # the database sets these
    with dagster_instance.event_log_storage.index_connection() as conn:
        return [
            tuple(row)
            for row in conn.execute(sa.select(*columns).where(table.c.run_id == run_id).order_by(table.c.partition))
        ]


def test_a_ranged_runs_planned_check_is_stored_per_partition_each_row_with_its_partition(dagster_instance) -> None:
    """Creating a ranged run announces its asset checks as planned, one row per check and partition
    (the UI's check history of a partition reads them). Dagster's own code stores the whole run's
    event in every row, P² partition keys for P partitions; ours stores in each row the event of that
    row's partition, every other column as Dagster writes it."""
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
    from dagster._serdes import deserialize_value

    job_def = Definitions(
        assets=[checked], jobs=[define_asset_job("checked_days", partitions_def=PLANNED_DAYS)]
    ).resolve_job_def("checked_days")
    run = dagster_instance.create_run_for_job(
        job_def, tags={RANGE_START_TAG: "2026-11-01", RANGE_END_TAG: "2026-11-20"}
    )
    ours = _check_rows(dagster_instance, run.run_id)
    days = [f"2026-11-{d:02d}" for d in range(1, 21)]
    assert [(r[0], r[1], r[2], r[4]) for r in ours] == [('["checked"]', "non_negative", d, "PLANNED") for d in days]
    for row, day in zip(ours, days, strict=True):
        entry = deserialize_value(row[5])
        planned = entry.dagster_event
        assert planned.event_type == DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED and entry.run_id == run.run_id
        assert list(planned.event_specific_data.partitions_subset.get_partition_keys()) == [day]
        assert planned.event_specific_data.check_name == "non_negative"

    # Dagster's own method, given the same stored event (our rows deleted first: a run has one row a
    # check and partition), writes the same rows but for their events.
    [record] = dagster_instance.get_records_for_run(
        run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED
    ).records
    storage = dagster_instance.event_log_storage
    with storage.index_connection() as conn:
        conn.execute(AssetCheckExecutionsTable.delete().where(AssetCheckExecutionsTable.c.run_id == run.run_id))
    SqlEventLogStorage._store_asset_check_evaluation_planned(storage, record.event_log_entry, record.storage_id)
    dagsters = _check_rows(dagster_instance, run.run_id)
    assert [r[:5] + r[6:] for r in dagsters] == [r[:5] + r[6:] for r in ours]
    for row in dagsters:
        assert (
            sorted(deserialize_value(row[5]).dagster_event.event_specific_data.partitions_subset.get_partition_keys())
            == days
        )


@asset(partitions_def=PLANNED_DAYS)
def judged() -> None: ...


@multi_asset_check(
    specs=[
        AssetCheckSpec("even_day", asset="judged", partitions_def=PLANNED_DAYS),
        AssetCheckSpec("any_day", asset="judged", partitions_def=PLANNED_DAYS),
    ],
    can_subset=True,
)
def judged_checks(context):  # type: ignore[no-untyped-def]
    """As the mart's checks: an evaluation per check and partition of the run (even days pass one check)."""
    for key in context.partition_keys:
        for name in ("even_day", "any_day"):
            passed = name == "any_day" or int(key[-2:]) % 2 == 0
            yield AssetCheckEvaluation(
                asset_key=AssetKey("judged"), check_name=name, passed=passed, partition=key, metadata={"day": key}
            )


def test_a_ranged_runs_check_evaluations_are_stored_together_as_dagster_stores_each(dagster_instance) -> None:
    """The mart's checks evaluate three checks per cabinet and day of a run; stored one by one (an
    event INSERT, then an UPDATE of the check's row on a connection of its own) they were a third of
    the run workers' CPU at 1,000 cabinets. Stored together, the UI and the check history read what
    Dagster's own code would have written."""
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
    from dagster._serdes import deserialize_value

    job_def = Definitions(
        assets=[judged],
        asset_checks=[judged_checks],
        jobs=[
            define_asset_job(
                "judged_days", selection=AssetSelection.checks_for_assets(judged), partitions_def=PLANNED_DAYS
            )
        ],
    ).resolve_job_def("judged_days")
    storage = dagster_instance.event_log_storage
    statements: list[str] = []
    engine = storage._engine  # the pooled engine every part of the storage talks through

    def seen(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        if "asset_check_executions" in statement and not statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        result = job_def.execute_in_process(
            instance=dagster_instance, tags={RANGE_START_TAG: "2026-11-01", RANGE_END_TAG: "2026-11-20"}
        )
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert result.success
    days = [f"2026-11-{d:02d}" for d in range(1, 21)]
    # The planned rows at the run's creation (a statement per check), then one for the 40 evaluations.
    assert [s.split()[0] for s in statements] == ["INSERT", "INSERT", "UPDATE"], statements

    records = dagster_instance.get_records_for_run(
        result.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION, limit=100
    ).records
    assert len(records) == 2 * len(days)
    ours = _check_rows(dagster_instance, result.run_id)
    by_key = {(r[1], r[2]): r for r in ours}
    assert len(ours) == 2 * len(days)
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        row = by_key[(evaluation.check_name, evaluation.partition)]
        assert row[4] == ("SUCCEEDED" if evaluation.passed else "FAILED")
        assert deserialize_value(row[5]) == record.event_log_entry  # the evaluation's own event
        assert row[7] == record.storage_id  # evaluation_event_storage_id: its event row
    assert {(r[1], r[2], r[4]) for r in ours if r[1] == "even_day"} == {
        ("even_day", d, "SUCCEEDED" if int(d[-2:]) % 2 == 0 else "FAILED") for d in days
    }
    # Dagster's own code, given the same stored events, writes the same rows.
    for record in records:
        SqlEventLogStorage._update_asset_check_evaluation(storage, record.event_log_entry, record.storage_id)
    assert sorted(_check_rows(dagster_instance, result.run_id)) == sorted(ours)
