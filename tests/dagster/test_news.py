"""WB news against the simulator: incremental by id, one request a minute across tokens and runs, token failover."""

from __future__ import annotations

import itertools
import os
import threading
import time
from datetime import timedelta

import pytest
from dagster import materialize

from optima_pipelines.definitions import RESOURCES
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sync import news
from optima_pipelines.sync.runs import ANY_CABINET, SyncInput
from optima_pipelines.warehouse.cabinets import get_token
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from optima_pipelines.wb import WbClient, WbConfig
from tests.wb_syncs import TIME_SCALE, served, simulator
from wb_simulator import CabinetSpec

INTERVAL = news.REQUEST_INTERVAL_SECONDS / TIME_SCALE


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    # About one news item every two days: 250 days of history are more than WB's page of 100.
    sim = simulator(
        CabinetSpec(id="c1", products=5, orders_per_day=5, history_days=250, campaigns=0),
        CabinetSpec(id="c2", products=5, orders_per_day=5, history_days=250, campaigns=0),
    )
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance) as base_url:
        sim.base_url = base_url  # type: ignore[attr-defined]
        yield sim


def articles(conn) -> dict[int, tuple]:
    rows = conn.execute("SELECT news_id, header, published_at FROM kb_articles").fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def truth_articles(sim) -> dict[int, tuple]:
    from datetime import datetime

    return {n["id"]: (n["header"], datetime.fromisoformat(n["date"])) for n in sim.truth.news()}


class Recorder:
    """WB clients for the news sync (one attempt, like production's) that note every request sent."""

    def __init__(self, sim, settings):
        self.sim, self.settings = sim, settings
        self.sent: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def client_for(self, cabinet_id: str) -> WbClient:
        warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
        with warehouse.connect() as conn:
            token = get_token(conn, TokenCipher(load_key(self.settings)), cabinet_id)

        def note(request) -> None:
            if request.url.path.endswith("/news"):
                with self.lock:
                    self.sent.append((time.monotonic(), cabinet_id))

        config = WbConfig.for_base_url(self.sim.base_url, time_scale=TIME_SCALE, max_attempts=1)
        return WbClient(cabinet_id, token, config=config, event_hooks={"request": [note]})

    def gaps(self) -> list[float]:
        moments = sorted(t for t, _ in self.sent)
        return [b - a for a, b in itertools.pairwise(moments)]


def test_news_load_incrementally_by_id(wb, warehouse_conn, dagster_instance):
    from optima_pipelines.assets.news import kb_articles

    truth = truth_articles(wb)
    assert len(truth) > 100
    first = materialize([kb_articles], resources=RESOURCES, instance=dagster_instance)
    assert first.success
    assert articles(warehouse_conn) == truth
    meta = first.asset_materializations_for_node("kb_articles")[0].metadata
    assert (meta["rows_inserted"].value, meta["wb_requests"].value) == (len(truth), 2)

    # Nothing new: one request, from the highest id stored.
    again = materialize([kb_articles], resources=RESOURCES, instance=dagster_instance)
    meta = again.asset_materializations_for_node("kb_articles")[0].metadata
    assert (meta["rows_inserted"].value, meta["wb_requests"].value) == (0, 1)

    wb.advance(timedelta(days=6))
    new = set(truth_articles(wb)) - set(truth)
    assert new
    later = materialize([kb_articles], resources=RESOURCES, instance=dagster_instance)
    meta = later.asset_materializations_for_node("kb_articles")[0].metadata
    assert meta["rows_inserted"].value == len(new)
    assert articles(warehouse_conn) == truth_articles(wb)


def test_one_request_a_minute_across_runs_and_a_revoked_token_fails_over(wb, warehouse_conn, settings):
    warehouse = Warehouse(database_url=os.environ["OPTIMA_DATABASE_URL"])
    wb.revoke(get_token(warehouse_conn, TokenCipher(load_key(settings)), "c1"))
    recorder = Recorder(wb, settings)
    results = []

    def sync() -> None:
        inp = SyncInput(
            connect=warehouse.connect,
            cabinet_id=ANY_CABINET,
            run_id=None,
            trigger="manual",
            client_for=recorder.client_for,
        )
        results.append((news.sync(inp), inp.notes))

    # Two syncs at once (a manual run beside the scheduled one) share WB's one request a minute.
    threads = [threading.Thread(target=sync) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 2
    assert articles(warehouse_conn) == truth_articles(wb)
    assert all([run.cabinet_id for run in runs] == ["c2"] for runs, _ in results)
    assert any(notes["rejected_tokens_of"] == ["c1"] for _, notes in results)
    assert len(recorder.sent) >= 4  # c1's rejected request, and c2's pages in both runs
    assert min(recorder.gaps()) >= INTERVAL * 0.9, recorder.gaps()


def test_when_every_token_is_rejected_the_run_fails_naming_the_cabinets(wb, warehouse_conn, dagster_instance, settings):
    from optima_pipelines.assets.news import kb_articles

    cipher = TokenCipher(load_key(settings))
    tokens = [get_token(warehouse_conn, cipher, c) for c in ("c1", "c2")]
    for token in tokens:
        wb.revoke(token)
    result = materialize([kb_articles], resources=RESOURCES, instance=dagster_instance, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.event_specific_data.error.message
    assert "WB rejected the token of every active cabinet" in message and "c1, c2" in message
    assert not any(token in message for token in tokens)
    assert articles(warehouse_conn) == {}
