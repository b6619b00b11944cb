"""The real UI, as a person meets it: behind basic auth, then driven in headless Chromium.

The shared deployment (tests/system/conftest.py: ``optima-pipelines dev`` with basic auth, on the
production code location) serves every test here. Screenshots land in ``test-artifacts/ui/``. ``LINEAGE`` names the WB feed
and the mart downstream of it: the lineage between them, the mart's partition grid and a backfill
of it are what the browser drives.
"""

import base64
import contextlib
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import websockets.sync.client
from websockets.exceptions import InvalidStatus

from optima_pipelines.timeutil import today_moscow
from tests.system.conftest import UI_PASSWORD as PASSWORD
from tests.system.conftest import UI_USER as USER
from tests.system.harness import wait_for

pytestmark = pytest.mark.system

LINEAGE = ("wb_orders", "rnp_daily")
CABINET = "ui-shop"
TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJ1aS1zaG9wIn0.dWktdGVzdC1zaWduYXR1cmU"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
CHROMIUM = "/usr/bin/chromium"
#: How long an action or an assertion waits for the page. Playwright's assertions wait 5 s unless
#: told otherwise (the context's default timeout is for actions only); on two busy cores Dagster's
#: partitions view once took longer than that to load its counts.
PAGE_MS = 60_000
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TODAY = today_moscow()
DAYS = [TODAY - timedelta(days=d) for d in (4, 3, 2)]


@pytest.fixture
def deployment(shared_stack):  # type: ignore[no-untyped-def]
    """The shared deployment's UI (its RunningDeployment)."""
    return shared_stack.dev


def basic_header() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


@pytest.mark.parametrize("path", ["/", "/server_info", "/assets/ui_mart", "/asset-groups", "/runs", "/graphql"])
def test_every_route_needs_a_login(deployment, path):
    refused = httpx.get(deployment.url + path, timeout=30)
    wrong = httpx.get(deployment.url + path, timeout=30, auth=(USER, "not-the-password"))
    allowed = httpx.get(deployment.url + path, timeout=30, auth=(USER, PASSWORD), params={"query": "{ version }"})
    assert refused.status_code == 401 and wrong.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic")
    assert allowed.status_code == 200


def test_graphql_and_its_websocket_need_a_login(deployment):
    query = {"query": "{ version }"}
    assert httpx.post(deployment.url + "/graphql", json=query, timeout=30).status_code == 401
    assert httpx.post(deployment.url + "/graphql", json=query, timeout=30, auth=(USER, PASSWORD)).status_code == 200

    ws_url = deployment.url.replace("http://", "ws://") + "/graphql"
    with pytest.raises(InvalidStatus) as refused:
        websockets.sync.client.connect(ws_url, subprotocols=["graphql-ws"], open_timeout=30)
    assert refused.value.response.status_code == 401
    with websockets.sync.client.connect(
        ws_url, subprotocols=["graphql-ws"], additional_headers=basic_header(), open_timeout=30
    ) as ws:
        assert ws.subprotocol == "graphql-ws"


def test_the_dev_log_says_auth_is_on(deployment):
    assert f"basic auth on, user '{USER}'" in deployment.log()
    assert PASSWORD not in deployment.log()


PARTITIONS = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      partitionKeysByDimension { name partitionKeys }
      partitionStats { numMaterialized }
    }
  }
}
"""
BACKFILLS = "{ partitionBackfillsOrError { ... on PartitionBackfills { results { id status numPartitions runs { runId status } } } } }"
DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def asset_node(dep, key: str) -> dict:
    return dep.graphql(PARTITIONS, {"key": {"path": [key]}})["assetNodeOrError"]


def scrape(dep) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(dep.metrics_url + "/metrics", timeout=30).text
    return {
        s.name + str(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


def finished_runs(figures: dict[str, float]) -> float:
    return sum(v for k, v in figures.items() if k.startswith("optima_queue_jobs_finished_total"))


def no_welcome(dep) -> None:
    """A fresh instance greets a browser on 127.0.0.1 with Dagster's newsletter dialog, a moment after
    the page, whenever it pleases; on a busy machine it opened over the backfill's own dialog, and
    neither could be clicked. Mark it seen, as its Skip button does (Dagster keeps that in
    DAGSTER_HOME), before any page opens: the UI then never shows it."""
    assert dep.graphql("mutation { setNuxSeen }")["setNuxSeen"] is True
    assert dep.graphql("{ shouldShowNux }")["shouldShowNux"] is False


def pick_from_list(opener, entry, attempts: int = 20) -> None:
    """Open a list the UI re-renders while its data refreshes (the partition picker) and click ``entry``.

    On a busy machine the list is replaced faster than Playwright's actionability checks settle
    ("element was detached from the DOM, retrying" until the timeout): click without waiting for
    stability, and try again if the element went away in between. A click on ``opener`` can also land
    before the dialog listens (CI once waited 60 s on a list that never opened): whenever the entry is
    not shown, open the list again."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(attempts):
        try:
            if not entry.is_visible():
                opener.click(timeout=3000)
            entry.click(timeout=3000, force=True)
            return
        except PlaywrightError:
            if attempt == attempts - 1:
                raise


def test_the_ui_in_a_browser_lineage_partitions_and_a_backfill(shared_stack):  # type: ignore[no-untyped-def]
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    deployment = shared_stack.dev
    # A cabinet whose token WB never sees: the UI under test, and the cabinet sensor that makes the
    # partitions it shows; no feed runs.
    shared_stack.add_cabinet_row(CABINET, "UI shop", TOKEN)
    shared_stack.start("cabinet_partitions_sensor")
    feed, target = LINEAGE[0], LINEAGE[-1]
    # The cabinet sensor puts the cabinet into the partition dimension within a tick or two.
    wait_for(
        lambda: any(CABINET in d["partitionKeys"] for d in asset_node(deployment, target)["partitionKeysByDimension"]),
        f"cabinet {CABINET} as a partition of {target}",
        timeout=120,
        dep=deployment,
    )
    before = scrape(deployment)
    # Earlier tests on this deployment may have materialized partitions and launched backfills.
    materialized_before = asset_node(deployment, target)["partitionStats"]["numMaterialized"]
    backfills_before = {b["id"] for b in deployment.graphql(BACKFILLS)["partitionBackfillsOrError"]["results"]}
    no_welcome(deployment)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # Without credentials the browser gets nothing but the 401 (headless Chromium has no
            # login prompt: navigation fails on the auth challenge).
            anonymous = browser.new_context()
            refused = anonymous.request.get(deployment.url + "/")
            assert refused.status == 401 and "dagster" not in refused.text().lower().replace("dagster ui", "")
            with pytest.raises(PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
                anonymous.new_page().goto(deployment.url + "/")
            anonymous.close()

            context = browser.new_context(
                http_credentials={"username": USER, "password": PASSWORD}, viewport={"width": 1400, "height": 1000}
            )
            context.set_default_timeout(PAGE_MS)
            page = context.new_page()

            # The lineage: the feed upstream of the target in the target's lineage graph.
            page.goto(f"{deployment.url}/assets/{target}?view=lineage&lineageScope=upstream")
            expect(page.get_by_text(target, exact=True).first).to_be_visible(timeout=PAGE_MS)
            every_level = page.get_by_role("button", name="All", exact=True).first
            if every_level.is_enabled():  # disabled when the graph already shows every upstream level
                every_level.click()
            for key in LINEAGE:
                expect(page.get_by_text(key, exact=True).first).to_be_visible(timeout=PAGE_MS)
            page.screenshot(path=ARTIFACTS / "1-lineage.png")
            page.goto(f"{deployment.url}/asset-groups")
            expect(page.get_by_text("Global asset lineage")).to_be_visible(timeout=PAGE_MS)
            page.screenshot(path=ARTIFACTS / "2-asset-graph.png")

            # The partitions tab: the cabinet × day grid.
            page.goto(f"{deployment.url}/assets/{target}?view=partitions")
            expect(page.get_by_text(CABINET, exact=True).first).to_be_visible(timeout=PAGE_MS)
            expect(page.get_by_text(DAYS[0].isoformat(), exact=True).first).to_be_visible(timeout=PAGE_MS)
            page.screenshot(path=ARTIFACTS / "3-partitions.png")

            # A backfill of one cabinet and three days, launched by clicking.
            page.get_by_role("button", name="Materialize…").first.click()
            confirm = page.get_by_role("button", name="Confirm")  # "upstream not materialized" warning
            if feed != target:
                confirm.click()
            dialog = page.get_by_role("dialog").filter(has_text=f"Launch runs to materialize {target}")
            cabinet = page.locator("label").filter(has=page.locator(f'[title="{CABINET}"]')).last
            dates = dialog.get_by_placeholder("ex: ")
            # A click on the picker's list can land while the list re-renders and select nothing (seen
            # once in CI): pick the cabinet again until the dialog counts the three partitions.
            for attempt in range(5):
                if dialog.get_by_text("Select a partition or create one").first.is_visible():
                    pick_from_list(dialog.get_by_role("img", name="expand_more").first, cabinet)
                dates.fill(f"[{DAYS[0].isoformat()}...{DAYS[-1].isoformat()}]")
                dates.press("Enter")
                try:
                    expect(dialog.get_by_text("3 partitions")).to_be_visible(timeout=10_000)
                    break
                except AssertionError:
                    if attempt == 4:
                        raise
            dialog.screenshot(path=ARTIFACTS / "4-backfill-dialog.png")
            dialog.get_by_role("button", name="Launch backfill").click()

            backfill = wait_for(
                lambda: next(
                    (
                        b
                        for b in deployment.graphql(BACKFILLS)["partitionBackfillsOrError"]["results"]
                        if b["id"] not in backfills_before and b["status"] in DONE
                    ),
                    None,
                ),
                "the backfill to finish",
                timeout=300,
                dep=deployment,
            )
            assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), backfill
            assert backfill["numPartitions"] == 3
            materialized = materialized_before + 3
            assert asset_node(deployment, target)["partitionStats"]["numMaterialized"] == materialized

            page.goto(f"{deployment.url}/assets/{target}?view=partitions")
            expect(page.get_by_text(f"Materialized ({materialized})")).to_be_visible(timeout=PAGE_MS)
            page.screenshot(path=ARTIFACTS / "5-partitions-after-backfill.png")
            page.goto(f"{deployment.url}/runs")
            page.screenshot(path=ARTIFACTS / "6-runs.png")
        except Exception:
            for shown in browser.contexts[-1:]:
                for open_page in shown.pages:  # what the browser showed when it failed (CI keeps the folder)
                    with contextlib.suppress(PlaywrightError):
                        open_page.screenshot(path=ARTIFACTS / "failure.png")
            raise
        finally:
            browser.close()

    # The figures moved: the backfill's runs (one, for the РНП's single-run backfill policy) are
    # counted as finished by the metrics process, and nothing else ran here.
    assert [r["status"] for r in backfill["runs"]] == ["SUCCESS"]
    after = wait_for(
        lambda: (f := scrape(deployment)) and finished_runs(f) >= finished_runs(before) + 1 and f,
        "the backfill's run among the finished runs in /metrics",
        timeout=60,
        dep=deployment,
    )
    assert finished_runs(after) == finished_runs(before) + 1
    assert after["optima_metrics_up[]"] == 1
    health = httpx.get(deployment.metrics_url + "/health", params={"wb": "0"}, timeout=60).json()
    assert health["healthy"], [check for check in health["checks"] if not check["ok"]]

    # No token anywhere in what the deployment printed (webserver, daemon, code server, runs).
    assert TOKEN not in deployment.log()
