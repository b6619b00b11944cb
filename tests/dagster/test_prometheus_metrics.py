"""/metrics as Prometheus reads it: `promtool check metrics` on a real scrape finds nothing to say but
about the original's own names, and docs/operations.md lists every metric the scrape exports."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from dagster import asset, materialize
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from optima_pipelines.operations.metrics import build_registry
from tests.ops_records import reaggregated, synced
from tests.promtool import promtool

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


@asset
def broken_for_the_scrape() -> None:
    raise RuntimeError("this run fails")


def documented_metrics() -> dict[str, bool]:
    """docs/operations.md's "Metrics" table: metric name -> whether it is marked as the original's."""
    section = DOCS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_:*]+)`[^|]*\|([^|]*)\|", section, re.M)
    assert rows, "docs/operations.md has no Metrics table"
    return {name: "original" in mark.lower() for name, mark in rows}


def full_scrape(dagster_instance, conn, database_url: str, settings) -> str:
    """A scrape in which every family has series: syncs of each family's feeds, one cabinet stale with
    a rejected token, a failed run, a re-aggregation."""
    now = datetime.now(UTC)
    conn.execute("INSERT INTO cabinets (id, name) VALUES ('a', 'A')")
    conn.execute("INSERT INTO cabinets (id, name, status) VALUES ('b', 'B', 'token_invalid')")
    for queue, feed in (
        ("digitization-sync", "wb_orders"),
        ("rnp-ads-sync", "ad_campaign_stats"),
        ("inventory-sync", "stocks"),
    ):
        for cabinet in ("a", "b"):
            synced(conn, queue, feed, cabinet, now, seconds=5, changed_days=1)
    reaggregated(conn, now, lag_seconds=9)
    tags = {"optima/queue": "example-jobs"}
    assert not materialize([broken_for_the_scrape], instance=dagster_instance, tags=tags, raise_on_error=False).success
    registry, collector = build_registry(database_url, settings.warehouse_schema, settings.dagster_schema)
    try:
        return generate_latest(registry).decode()
    finally:
        collector.close()


def test_promtool_finds_nothing_to_say_but_about_the_originals_names(
    dagster_instance, warehouse_conn, database_url, settings
):
    text = full_scrape(dagster_instance, warehouse_conn, database_url, settings)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["optima_metrics_up"].samples[0].value == 1
    stale = [s for s in families["optima_feed_stale_cabinet_age_seconds"].samples if s.labels["cabinet"] == "b"]
    assert {s.labels["cause"] for s in stale} == {"token_invalid"}
    failed = {s.labels["queue"]: s.value for s in families["optima_failed_runs_kept"].samples}
    assert failed["example-jobs"] == 1

    result = promtool("check", "metrics", stdin=text)
    complaints = [line.split()[0] for line in result.stdout.splitlines() + result.stderr.splitlines() if line.strip()]
    originals = {name for name, original in documented_metrics().items() if original}
    assert complaints, "promtool said nothing, not even about the original's optima_queue_job_duration_ms"
    not_original = sorted(set(complaints) - originals)
    assert not not_original, (
        f"promtool check metrics complains about names that are not the original's:\n{result.stdout}"
    )


def test_the_docs_list_every_metric_the_scrape_exports(dagster_instance, warehouse_conn, database_url, settings):
    text = full_scrape(dagster_instance, warehouse_conn, database_url, settings)
    exported = {f.name for f in text_string_to_metric_families(text)}
    documented = documented_metrics()
    patterns = [re.compile(name.replace("*", "[a-z_]+") + "$") for name in documented]
    undocumented = sorted(name for name in exported if not any(p.match(name) for p in patterns))
    assert not undocumented, f"docs/operations.md's Metrics table leaves out: {undocumented}"
    gone = sorted(name for name in documented if "*" not in name and name not in exported)
    assert not gone, f"docs/operations.md lists metrics /metrics does not export: {gone}"
