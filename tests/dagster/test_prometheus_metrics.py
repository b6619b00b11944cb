"""/metrics as Prometheus reads it: `promtool check metrics` on a real scrape finds nothing to say but
about the original's own names, and docs/operations.md lists every metric the scrape exports."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.ops_records import full_scrape
from tests.promtool import promtool

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def documented_metrics() -> dict[str, bool]:
    """docs/operations.md's "Metrics" table: metric name -> whether it is marked as the original's."""
    section = DOCS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_:*]+)`[^|]*\|([^|]*)\|", section, re.M)
    assert rows, "docs/operations.md has no Metrics table"
    return {name: "original" in mark.lower() for name, mark in rows}


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
