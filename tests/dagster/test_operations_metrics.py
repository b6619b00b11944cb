"""/metrics on real storage: runs in Dagster's run storage and sync figures in the warehouse become the figures."""

import uuid
from datetime import UTC, datetime

from dagster import DagsterRun, asset, materialize
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from optima_pipelines.operations.metrics import build_registry
from tests.ops_records import full_scrape, reaggregated, synced


@asset
def metered() -> None:
    """A run that succeeds."""


@asset
def broken() -> None:
    raise RuntimeError("this run fails")


def scrape(registry) -> dict[tuple[str, frozenset], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(figures, name, **labels) -> float | None:
    return figures.get((name, frozenset(labels.items())))


def queued_run(instance, conn, dagster_schema: str, queue: str, status: str = "QUEUED") -> str:
    # A QUEUED run needs a remote origin (a code location); the figures only read status and tags,
    # so a NOT_STARTED run is moved to QUEUED (or STARTING) in storage directly.
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="queued_job", run_id=run_id, tags={"optima/queue": queue}))
    conn.execute(f"UPDATE {dagster_schema}.runs SET status = %s WHERE run_id = %s", (status, run_id))
    return run_id


def test_scrape_reports_queue_runs_durations_and_sync_figures(dagster_instance, warehouse_conn, database_url, settings):
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    before = scrape(registry)
    assert sample(before, "optima_metrics_up") == 1
    assert sample(before, "optima_queue_oldest_queued_run_age_seconds") == 0
    assert sample(before, "optima_queue_oldest_starting_run_age_seconds", queue="inventory-sync") == 0

    for queue in ("digitization-sync", "digitization-sync", "rnp-ads-sync"):
        queued_run(dagster_instance, warehouse_conn, settings.dagster_schema, queue)
    # A run launched 90 s ago that no run worker started: its age counts from its launch (update_timestamp).
    starting = queued_run(dagster_instance, warehouse_conn, settings.dagster_schema, "inventory-sync", "STARTING")
    warehouse_conn.execute(
        f"UPDATE {settings.dagster_schema}.runs SET update_timestamp = localtimestamp - interval '90 seconds' "
        "WHERE run_id = %s",
        (starting,),
    )
    tags = {"optima/queue": "example-jobs"}
    assert materialize([metered], instance=dagster_instance, tags=tags).success
    assert materialize([metered], instance=dagster_instance, tags=tags).success
    assert not materialize([broken], instance=dagster_instance, tags=tags, raise_on_error=False).success
    skipped = {"optima/queue": "digitization-sync", "optima/skipped": "account-busy"}
    assert materialize([metered], instance=dagster_instance, tags=skipped).success

    now = datetime.now(UTC)
    for cabinet, fetched in (("a", 100), ("b", 50)):
        synced(
            warehouse_conn,
            "digitization-sync",
            "wb_orders",
            cabinet,
            now,
            seconds=5,
            rows_fetched=fetched,
            rows_inserted=fetched // 2,
            changed_days=2,
        )
    synced(warehouse_conn, "rnp-finance-sync", "wb_report_lines", "a", now, seconds=5, status="failure")
    warehouse_conn.execute("INSERT INTO cabinets (id, name) VALUES ('a', 'A'), ('b', 'B')")
    reaggregated(warehouse_conn, now, lag_seconds=40, partitions=4)

    after = scrape(registry)
    assert sample(after, "optima_metrics_up") == 1
    assert sample(after, "optima_queue_jobs", queue="digitization-sync", status="queued") == 2
    assert sample(after, "optima_queue_jobs", queue="rnp-ads-sync", status="queued") == 1
    assert sample(after, "optima_queue_jobs", queue="example-jobs", status="success") == 2
    assert sample(after, "optima_queue_jobs", queue="example-jobs", status="failure") == 1
    assert sample(after, "optima_queue_jobs_skipped", queue="digitization-sync", reason="account-busy") == 1
    assert 0 <= sample(after, "optima_queue_oldest_queued_age_seconds", queue="digitization-sync") < 300
    # The deployment-wide figure is the oldest of the queues' (the three runs queued before the materializations).
    oldest_by_queue = [
        sample(after, "optima_queue_oldest_queued_age_seconds", queue=queue)
        for queue in ("digitization-sync", "rnp-ads-sync")
    ]
    assert 0 < sample(after, "optima_queue_oldest_queued_run_age_seconds") == max(oldest_by_queue)
    assert 90 <= sample(after, "optima_queue_oldest_starting_run_age_seconds", queue="inventory-sync") < 300
    assert sample(after, "optima_queue_oldest_starting_run_age_seconds", queue="digitization-sync") == 0

    # Runs that finished since the previous scrape feed the counters and the duration histogram.
    assert sample(after, "optima_queue_jobs_finished_total", queue="example-jobs", status="success") == 2
    assert sample(after, "optima_queue_jobs_finished_total", queue="example-jobs", status="failure") == 1
    assert sample(after, "optima_queue_job_duration_ms_count", queue="example-jobs") == 3
    assert sample(after, "optima_queue_job_duration_ms_bucket", queue="example-jobs", le="+Inf") == 3
    assert sample(after, "optima_queue_job_duration_ms_sum", queue="example-jobs") > 0

    assert sample(after, "optima_digitization_feed_sync_rows_total", feed="wb_orders", kind="fetched") == 150
    assert sample(after, "optima_digitization_feed_sync_rows_total", feed="wb_orders", kind="inserted") == 75
    assert sample(after, "optima_digitization_feed_sync_runs_total", feed="wb_orders", status="success") == 2
    assert sample(after, "optima_digitization_feed_sync_changed_partitions_total", feed="wb_orders") == 4
    assert 0 <= sample(after, "optima_digitization_feed_sync_last_success_age_seconds", feed="wb_orders") < 300
    assert sample(after, "optima_rnp_sync_runs_total", feed="wb_report_lines", status="failure") == 1
    assert sample(after, "optima_rnp_sync_failing_cabinets", feed="wb_report_lines") == 1
    assert sample(after, "optima_reaggregate_partitions_recomputed_total", domain="rnp-sales") == 4
    assert sample(after, "optima_reaggregate_lag_seconds_sum", domain="rnp-sales") == 40
    assert sample(after, "optima_reaggregate_recent_lag_seconds", domain="rnp-sales", quantile="1") == 40
    assert sample(after, "optima_cabinets", status="active") == 2

    # A later scrape does not count the same runs twice.
    again = scrape(registry)
    assert sample(again, "optima_queue_job_duration_ms_count", queue="example-jobs") == 3
    collector.close()


def test_a_failed_read_says_so_instead_of_reporting_zeros(optima_env, database_url, settings):
    registry, collector = build_registry(database_url, settings.warehouse_schema, "dagster_no_such_schema")
    figures = scrape(registry)
    assert sample(figures, "optima_metrics_up") == 0
    assert not any(name.startswith("optima_queue_jobs") for name, _ in figures)
    collector.close()


def test_after_db_upgrade_a_fresh_deployment_is_scraped_whole_with_every_series_at_zero(
    optima_env, database_url, settings
):
    """`db upgrade` then `/metrics`, before any Dagster process ran: every figure is read, and the series
    a dashboard names exist at 0 (not "no data")."""
    from optima_pipelines.orchestration.queues import QUEUES
    from tests.cli_runner import invoke_cli

    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    # The environment's warehouse is migrated, but Dagster's storage does not exist yet.
    assert sample(scrape(registry), "optima_metrics_up") == 0

    upgraded = invoke_cli("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"{settings.dagster_schema}: Dagster's storage ready" in upgraded.stdout

    figures = scrape(registry)
    collector.close()
    assert sample(figures, "optima_metrics_up") == 1
    for queue in QUEUES:
        for status in ("queued", "running", "success", "failure", "canceled"):
            assert sample(figures, "optima_queue_jobs", queue=queue, status=status) == 0, (queue, status)
        assert sample(figures, "optima_queue_jobs_finished_total", queue=queue, status="failure") == 0, queue
        assert sample(figures, "optima_queue_job_duration_ms_count", queue=queue) == 0, queue
        assert sample(figures, "optima_queue_jobs_skipped", queue=queue, reason="account-busy") == 0, queue
    assert sample(figures, "optima_queue_oldest_queued_run_age_seconds") == 0
    for outcome in ("succeeded", "skipped", "deferred", "retrying", "failed"):
        assert sample(figures, "optima_sweep_cabinets", queue="rnp-ads-sync", outcome=outcome) == 0, outcome
    for status in ("active", "paused", "token_invalid", "archived"):
        assert sample(figures, "optima_cabinets", status=status) == 0, status
    assert sample(figures, "optima_digitization_feed_sync_runs_total", feed="wb_orders", status="failure") == 0
    assert sample(figures, "optima_rnp_sync_failing_cabinets", feed="wb_report_lines") == 0
    assert sample(figures, "optima_feed_sync_rows_total", feed="stocks", kind="fetched") == 0


def test_every_expression_of_the_shipped_grafana_dashboard_names_exported_series(
    dagster_instance, warehouse_conn, database_url, settings
):
    """deploy/grafana/optima-queues.json: each panel's query names metrics and labels that /metrics exports."""
    import json
    import re
    from pathlib import Path

    # Syncs of a feed of each family, a re-aggregation, a cabinet stale with a rejected token (named on
    # /metrics, the freshness table): the series with an age exist.
    text = full_scrape(dagster_instance, warehouse_conn, database_url, settings)
    labels_by_name: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels_by_name.setdefault(s.name, set()).update(s.labels)
    assert labels_by_name["optima_metrics_up"] == set()

    dashboard = json.loads((Path(__file__).parents[2] / "deploy" / "grafana" / "optima-queues.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]  # a row has none
    assert len(exprs) >= 10
    selector = re.compile(r"\b(optima_[a-z0-9_]+)(?:\{([^}]*)\})?")
    for expr in exprs:
        names = selector.findall(expr)
        assert names, f"no optima metric in {expr!r}"
        for name, matchers in names:
            assert name in labels_by_name, f"{expr!r} names {name}, which /metrics does not export"
            for key in re.findall(r"([a-z_]+)\s*=~?", matchers):
                assert key in labels_by_name[name], f"{expr!r}: {name} has no label {key!r}"
        for group in re.findall(r"by \(([^)]*)\)", expr):
            for key in (k.strip() for k in group.split(",")):
                assert any(key in labels_by_name[name] for name, _ in names), f"{expr!r}: no series has label {key!r}"
