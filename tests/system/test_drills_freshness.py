"""Fault drills on the real deployment (`pytest -m drill`): what an operator sees when one cabinet of
several falls behind, in the Dagster UI, on /metrics and by alert, and that it clears by itself.

One deployment (`optima-pipelines dev` with the WB simulator) serves both drills, on short cadences:
OPTIMA_CADENCE_SCALE=15 runs the ads every 20 s (allowance 40 s: a whole window missed), and the
freshness checks tick every 10 s. Three cabinets sync their ads; then

(a) one gets a long WB penalty (429 with a retry far ahead, wb_simulator's ``penalize``): the feed's
    ``fresh_per_cabinet`` check (GraphQL: its latest evaluation) names it with its cause and WB's
    "until when", /metrics names it, and the alert rules fire over the scraped series (promtool
    evaluates deploy/prometheus/optima-alerts.yml's expressions, ``for`` and labels over them; the
    annotations are left out of the comparison). The UI's Checks tab is saved to docs/img/. Once the
    penalty ends, the cabinet is confirmed again and leaves the check and /metrics;
(c) another's token is revoked at WB: it shows as ``token_invalid`` in the UI's check and in /metrics,
    at once; with a new token it clears (while the other's penalty still runs).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from optima_pipelines.warehouse.cabinets import set_token
from optima_pipelines.warehouse.secrets import TokenCipher
from tests.promtool import RULES_DIR, promtool
from tests.system.harness import only_automations, wait_for
from wb_simulator import CabinetSpec

pytestmark = [pytest.mark.system, pytest.mark.drill]

SCALE = "15"
TIME_SCALE = 60  # simulated seconds per real second
FEED = "ad_campaign_stats"
ADS_FEEDS = ("ad_campaigns", "ad_campaign_stats")
HEALTHY, PENALIZED, REVOKED = "drill-1", "drill-2", "drill-3"
#: The penalty, in real seconds: long enough for the cabinet to pass twice its allowance (OptimaCabinetStale)
#: while still penalized (its age at the penalty's start is up to a window).
PENALTY_S = 110
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
#: `OPTIMA_TEST_UPDATE_DOCS=1 pytest -m drill` refreshes docs/img's screenshot from this drill.
UPDATE_DOCS_ENV = "OPTIMA_TEST_UPDATE_DOCS"

CHECK = """
query($key: AssetKeyInput!) {
  assetCheckExecutions(assetKey: $key, checkName: "fresh_per_cabinet", limit: 1) {
    status
    evaluation {
      success severity description timestamp
      metadataEntries { label ... on JsonMetadataEntry { jsonString } }
    }
  }
}
"""


@pytest.fixture(scope="module")
def drill(stack_factory):  # type: ignore[no-untyped-def]
    cabinets = [CabinetSpec(id=c, products=5, orders_per_day=5, history_days=3) for c in (HEALTHY, PENALIZED, REVOKED)]
    stack = stack_factory(
        cabinets,
        time_scale=TIME_SCALE,
        extra_env={
            "OPTIMA_CADENCE_SCALE": SCALE,
            "OPTIMA_LOG_FORMAT": "json",
            **only_automations(
                "cabinet_partitions_sensor", "ads_sync_sensor", "wb_sync_resume_sensor", "feed_freshness_sensor"
            ),
        },
    )
    return stack


def check(dep, feed: str = FEED) -> dict | None:
    """The latest evaluation of the feed's freshness check, as the UI shows it: passed, severity,
    description and the stale cabinets ({cabinet: entry})."""
    executions = dep.graphql(CHECK, {"key": {"path": [feed]}})["assetCheckExecutions"]
    if not executions or executions[0]["evaluation"] is None:
        return None
    evaluation = executions[0]["evaluation"]
    entries = {e["label"]: e.get("jsonString") for e in evaluation["metadataEntries"]}
    stale = {s["cabinet"]: s for s in json.loads(entries.get("stale") or "[]")}
    return {**evaluation, "stale": stale}


def scrape(dep) -> str:
    return httpx.get(dep.metrics_url + "/metrics", timeout=30).text


def stale_series(text: str, feed: str = FEED) -> dict[str, tuple[str, float]]:
    """/metrics' named stale cabinets of ``feed``: cabinet -> (cause, age)."""
    return {
        s.labels["cabinet"]: (s.labels["cause"], s.value)
        for f in text_string_to_metric_families(text)
        if f.name == "optima_feed_stale_cabinet_age_seconds"
        for s in f.samples
        if s.labels["feed"] == feed
    }


def gauge(text: str, name: str, **labels: str) -> float | None:
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


def confirmed(stack, cabinets: tuple[str, ...]) -> dict[str, datetime]:
    with stack.warehouse() as conn:
        rows = conn.execute(
            "SELECT cabinet_id, confirmed_at FROM ops_feed_sync_totals WHERE feed = %s AND cabinet_id = ANY(%s)",
            (FEED, list(cabinets)),
        ).fetchall()
    return {c: at for c, at in rows if at is not None}


def firing_alerts(text: str, tmp: Path) -> dict[str, list[dict[str, str]]]:
    """The alerts of deploy/prometheus/optima-alerts.yml that fire over these scraped series (held for
    20 minutes), as promtool evaluates them: alert name -> the firing alerts' labels. The series are
    the ads feeds' and those without a feed (the drill's other feeds are not synced at all).

    promtool compares what fires with what a test expects and prints both when they differ: each alert
    is tested expecting nothing, and its "got" list is read back. The rules are copied without their
    annotations (templated text, not what fires)."""
    rules = yaml.safe_load((RULES_DIR / "optima-alerts.yml").read_text())
    names = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
            names.append(rule["alert"])
    (tmp / "rules.yml").write_text(yaml.safe_dump(rules))
    series = []
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if not s.name.startswith("optima_") or s.labels.get("feed", FEED) not in ADS_FEEDS:
                continue
            labels = {"job": "optima", "instance": "drill", **s.labels}
            selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            series.append({"series": f"{s.name}{{{selector}}}", "values": f"{s.value}x20"})
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [{"eval_time": "15m", "alertname": name, "exp_alerts": []} for name in names],
            }
        ],
    }
    (tmp / "tests.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "tests.yml", cwd=tmp)
    fired: dict[str, list[dict[str, str]]] = {}
    out = result.stdout + result.stderr
    for block in out.split("alertname: ")[1:]:
        name = block.split(",", 1)[0]
        got = block.split("got:", 1)[1]
        fired[name] = [
            dict(pair.split("=", 1) for pair in labels.replace('"', "").split(", "))
            for labels in (chunk.split("}", 1)[0] for chunk in got.split("Labels:{")[1:])
        ]
    assert result.returncode == 0 or fired, out
    return fired


def screenshot_checks(dep, path: Path) -> None:
    """The feed's check in the UI, in headless Chromium, as docs/operations.md shows it: its latest
    evaluation naming the penalized cabinet."""
    from playwright.sync_api import expect, sync_playwright

    from tests.system.test_ui_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, no_welcome

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)"
    path.parent.mkdir(parents=True, exist_ok=True)
    no_welcome(dep)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{dep.url}/assets/{FEED}?view=checks&checkDetail=fresh_per_cabinet")
            shot = ARTIFACTS / path.name
            try:
                expect(page.get_by_text(PENALIZED).first).to_be_visible(timeout=60_000)
            finally:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=shot)  # what the browser showed, also when it failed
            # docs/img only gets a screenshot of the stale cabinet, and only when asked (or when it has
            # none): a test run leaves the working tree as it found it.
            if os.environ.get(UPDATE_DOCS_ENV) == "1" or not path.exists():
                shutil.copyfile(shot, path)
        finally:
            browser.close()


def json_lines(log: str) -> list[dict]:
    """The JSON lines of the deployment's output (OPTIMA_LOG_FORMAT=json); Dagster's own processes
    print other lines too."""
    out = []
    for line in log.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def test_run_workers_log_each_line_once_in_json_and_a_failed_run_as_a_failure(drill):
    """In the run workers: each line of a run once, as one JSON object with run id, job, queue and
    cabinet; a failed run's error at ERROR, and its Celery task not "succeeded"."""
    from optima_pipelines.orchestration.runconfig import cabinet_run_config
    from tests.system.test_concurrency import launch_run

    stack, dep = drill, drill.dev
    wait_for(lambda: len(confirmed(stack, (HEALTHY,))) == 1, "a sweep of the ads", timeout=240, dep=dep)
    failed = launch_run(dep, "ads_sync", cabinet_run_config("ads_sync", "ghost-shop"))
    assert dep.wait_for_run(failed) == "FAILURE"
    # The step's failure (the run's process) and Celery's verdict (the worker's) are printed apart.
    try:
        lines = wait_for(
            lambda: (
                (ls := json_lines(dep.log()))
                and any(e.get("run_id") == failed and "STEP_FAILURE" in str(e.get("message")) for e in ls)
                and any(f"run {failed} of ads_sync ended FAILURE" in str(e.get("message")) for e in ls)
                and ls
            ),
            "the run worker's lines about the failed run",
            timeout=60,
            dep=dep,
        )
    except AssertionError as missing:  # what the run's event log holds, beside what was printed
        events = [(e.dagster_event_type, e.step_key, e.message[:160]) for e in stack.instance.all_logs(failed)]
        printed = [e for e in json_lines(dep.log()) if failed in str(e)]
        raise AssertionError(f"{missing}\nits events: {events}\nprinted: {printed}") from None
    # A sweep's line about one cabinet: once, with its run, job, queue and cabinet.
    swept = [e for e in lines if f"ads_sync of {HEALTHY}: succeeded" in e["message"]]
    assert swept, "no sweep line about the healthy cabinet"
    first = swept[0]
    assert (first["job"], first["queue"], first["cabinet"]) == ("ads_sync_sweep", "rnp-ads-sync", HEALTHY), first
    assert len([e for e in swept if e["run_id"] == first["run_id"]]) == 1, swept
    # The failed run: its step failure once, at ERROR, with its job and queue; Celery's task failed.
    failures = [e for e in lines if e["run_id"] == failed and "STEP_FAILURE" in e["message"]]
    assert len(failures) == 1, [e for e in lines if e.get("run_id") == failed or failed in str(e.get("message"))]
    assert (failures[0]["level"], failures[0]["job"], failures[0]["queue"], failures[0]["cabinet"]) == (
        "ERROR",
        "ads_sync",
        "rnp-ads-sync",
        "ghost-shop",
    )
    celery = [e for e in lines if f"run {failed} of ads_sync ended FAILURE" in e["message"]]
    assert len(celery) == 1 and "raised expected" in celery[0]["message"], celery
    assert not any("succeeded" in e["message"] and failed in e["message"] for e in lines)
    assert not any(e["level"] == "WARNING" and "STEP_FAILURE" in e["message"] for e in lines)


def test_a_penalized_and_a_revoked_cabinet_are_named_with_their_cause_then_clear(drill, tmp_path):
    stack, dep = drill, drill.dev
    # The deployment's allowance for the ads, as /metrics tells it: two 20-s windows.
    assert gauge(scrape(dep), "optima_feed_freshness_allowance_seconds", feed=FEED) == 40
    allowance = 40
    everyone = (HEALTHY, PENALIZED, REVOKED)
    wait_for(lambda: len(confirmed(stack, everyone)) == 3, "every cabinet's ads confirmed", timeout=240, dep=dep)
    wait_for(lambda: (c := check(dep)) and c["success"], "the ads check passing", timeout=60, dep=dep)

    # (a) a WB penalty on one cabinet's whole advert API, (c) another's token withdrawn at WB.
    stack.sim.penalize(PENALIZED, "advert", PENALTY_S * TIME_SCALE)
    penalty_ends = datetime.now(UTC) + timedelta(seconds=PENALTY_S)
    stack.sim.revoke(stack.tokens[REVOKED])

    # The UI: within the allowance, a window and a tick, the check fails naming both with their cause.
    def both_named() -> dict | None:
        c = check(dep)
        return c if c and {PENALIZED, REVOKED} <= set(c["stale"]) else None

    named = wait_for(both_named, "the ads check naming both cabinets", timeout=allowance + 20 + 10 + 60, dep=dep)
    assert not named["success"] and named["severity"] == "ERROR"
    assert HEALTHY not in named["stale"]
    penalty = named["stale"][PENALIZED]
    assert penalty["cause"] == "wb_paused", penalty
    assert "WB paused the sync until " in penalty["detail"] and "429" in penalty["detail"], penalty
    until = datetime.strptime(penalty["detail"].split("until ", 1)[1][:23], "%Y-%m-%d %H:%M:%S UTC")
    assert abs((until.replace(tzinfo=UTC) - penalty_ends).total_seconds()) < 30, (until, penalty_ends)
    assert named["stale"][REVOKED]["cause"] == "token_invalid"
    assert f"{PENALIZED} stale for" in named["description"] and f"{REVOKED} stale for" in named["description"]

    # /metrics names both, and counts the rejected token.
    text = scrape(dep)
    assert stale_series(text)[PENALIZED][0] == "wb_paused"
    assert stale_series(text)[REVOKED][0] == "token_invalid"
    assert HEALTHY not in stale_series(text)
    assert gauge(text, "optima_feed_stale_cabinets", feed=FEED) == 2
    assert gauge(text, "optima_cabinets", status="token_invalid") == 1

    # The alerts, once the penalized cabinet is twice its allowance behind (OptimaCabinetStale) on
    # each ads feed: the feeds' last syncs are seconds apart, so one feed crosses the line before the other.
    def past_twice_the_allowance(text: str) -> bool:
        return all(stale_series(text, feed).get(PENALIZED, ("", 0))[1] > 2 * allowance + 5 for feed in ADS_FEEDS)

    text = wait_for(
        lambda: (t := scrape(dep)) and past_twice_the_allowance(t) and t,
        f"{PENALIZED} stale for twice its allowance on /metrics, on every ads feed",
        timeout=2 * allowance + 60,
        dep=dep,
    )
    fired = firing_alerts(text, tmp_path)
    assert {a["feed"] for a in fired["OptimaFeedStale"]} == set(ADS_FEEDS)
    assert {(a["feed"], a["cabinet"], a["cause"]) for a in fired["OptimaCabinetStale"]} == {
        (feed, PENALIZED, "wb_paused") for feed in ADS_FEEDS
    }
    assert [a["cabinet"] for a in fired["OptimaTokenInvalid"]] == [REVOKED]
    assert "OptimaExporterDown" not in fired and "OptimaFailedRunsGrowing" not in fired

    screenshot_checks(dep, DOCS_IMG / "stale-cabinet-check.png")

    # (c) cleared while the penalty still runs: a new token makes the cabinet active, synced, fresh.
    with stack.warehouse() as conn:
        set_token(conn, TokenCipher(stack.environment["OPTIMA_SECRET_KEY"].encode()), REVOKED, stack.sim.token(REVOKED))
    renewed = wait_for(
        lambda: (c := check(dep)) and REVOKED not in c["stale"] and c,
        "the cabinet with a new token leaving the ads check",
        timeout=120,
        dep=dep,
    )
    if datetime.now(UTC) < penalty_ends:  # the other's penalty keeps it named meanwhile
        assert PENALIZED in renewed["stale"], renewed
    assert gauge(scrape(dep), "optima_cabinets", status="token_invalid") == 0

    # (a) the penalty ends: the cabinet is synced again and leaves the check and /metrics; it passes.
    cleared = wait_for(
        lambda: (c := check(dep)) and c["success"] and c,
        "the ads check passing again once the penalty ended",
        timeout=max(0.0, (penalty_ends - datetime.now(UTC)).total_seconds()) + 120,
        dep=dep,
    )
    assert cleared["stale"] == {} and cleared["severity"] == "ERROR"
    text = scrape(dep)
    assert stale_series(text) == {} and gauge(text, "optima_feed_stale_cabinets", feed=FEED) == 0
    assert all(token not in dep.log() for token in stack.tokens.values())
