"""Health checks name the failing part, and WB's /ping is asked at most 2 times per 30 s per host."""

import json
import threading
from collections import Counter
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler

import pytest

from optima_pipelines.db.migrate import head_revision
from optima_pipelines.operations.health import WB_PING_CATEGORIES, check_wb, run_checks
from optima_pipelines.warehouse import cabinets
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from tests.cli_runner import invoke_cli
from tests.fake_http import Answer, json_server

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJoZWFsdGgifQ.c2lnbmF0dXJl"


class FakeWbPing:
    """WB's /ping on localhost, each category under its path prefix (as OPTIMA_WB_BASE_URL addresses the
    simulator): 200 with the right token, 401 on the category named ``rejecting``."""

    def __init__(self, rejecting: str):
        self.rejecting = rejecting
        self.hits: Counter[str] = Counter()
        self.tokens: set[str] = set()
        self._served = ExitStack()
        self.url = self._served.enter_context(json_server(self._answer))

    def _answer(self, request: BaseHTTPRequestHandler) -> Answer:
        host = request.path.strip("/").split("/")[0]
        self.hits[host] += 1
        self.tokens.add(request.headers.get("Authorization", ""))
        body = json.dumps({"TS": "2026-11-30T10:00:00+03:00", "Status": "OK"}).encode()
        return (401 if host == self.rejecting else 200), {}, body

    def close(self):
        self._served.close()


@pytest.fixture
def wb():
    fake = FakeWbPing(rejecting="advert")
    yield fake
    fake.close()


@pytest.fixture
def cipher(settings):
    return TokenCipher(load_key(settings))


def test_without_a_daemon_the_daemon_check_fails_and_names_it(dagster_instance, database_url, settings, cipher):
    checks = {
        c.name: c for c in run_checks(database_url, settings.warehouse_schema, lambda: dagster_instance, cipher, None)
    }
    assert checks["warehouse"].ok and head_revision() in checks["warehouse"].detail
    assert checks["dagster storage"].ok
    assert not checks["daemon"].ok
    assert "no heartbeat from" in checks["daemon"].detail and "SENSOR" in checks["daemon"].detail
    assert checks["wb"].ok and "no active cabinet has a token" in checks["wb"].detail
    # The warm run workers are the default launcher: none beats here, and the broker (PostgreSQL) answers.
    assert not checks["run workers"].ok and "no run worker has ever beaten" in checks["run workers"].detail
    assert checks["broker"].ok, checks["broker"].detail


def test_a_daemon_that_stopped_beating_fails_within_minutes_not_dagsters_half_hour(dagster_instance):
    """Dagster counts a daemon healthy for 1,800 s after its last heartbeat: /health would have said a
    killed daemon (no schedule, sensor or queue running) was fine for half an hour. Ours allows the
    30-s heartbeat interval plus DAEMON_TOLERANCE_SECONDS."""
    import time

    from dagster._daemon.types import DaemonHeartbeat

    from optima_pipelines.operations.health import DAEMON_TOLERANCE_SECONDS, check_daemon

    required = dagster_instance.get_required_daemon_types()

    def beat(age: float) -> None:
        for daemon_type in required:
            dagster_instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - age, daemon_type, None, None))

    beat(age=10)
    assert check_daemon(lambda: dagster_instance).ok
    # Older than Dagster's 30-s interval plus our tolerance, far younger than Dagster's 1,800 s.
    beat(age=30 + DAEMON_TOLERANCE_SECONDS + 60)
    failed = check_daemon(lambda: dagster_instance)
    assert not failed.ok
    assert f"no heartbeat within {30 + DAEMON_TOLERANCE_SECONDS} s from" in failed.detail, failed.detail
    assert all(t in failed.detail for t in required) and "the last 2" in failed.detail, failed.detail
    assert {t: s.healthy for t, s in dagster_instance.get_daemon_statuses().items()} == dict.fromkeys(required, True)


def test_wb_pings_reach_every_category_of_the_simulator_as_the_client_does(
    warehouse_conn, database_url, settings, cipher
):
    """OPTIMA_WB_BASE_URL set (the simulator): each category's /ping at the path the WB client uses."""
    from wb_simulator import CabinetSpec, Simulator, serve

    sim = Simulator(seed=3, cabinets=[CabinetSpec(id="shop-1", products=2)])
    cabinets.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop", sim.token("shop-1"))
    with serve(sim) as base_url:
        checks = check_wb(database_url, settings.warehouse_schema, cipher, base_url)
    assert [c.name for c in checks] == [f"wb {c}" for c in WB_PING_CATEGORIES]
    assert all(c.ok and "200 OK" in c.detail for c in checks), [c.line() for c in checks]


def test_wb_pings_use_a_cabinet_token_name_the_failing_host_and_reuse_recent_answers(
    warehouse_conn, database_url, settings, cipher, wb
):
    cabinets.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop", TOKEN)
    first = check_wb(database_url, settings.warehouse_schema, cipher, wb.url)
    assert {c.name: c.ok for c in first} == {f"wb {h}": h != "advert" for h in WB_PING_CATEGORIES}
    failing = next(c for c in first if not c.ok)
    assert "token rejected (401)" in failing.detail and TOKEN not in failing.detail
    assert wb.tokens == {TOKEN}

    # Asked again at once (a second checker, a probe loop): WB is not asked again, the answer is reused.
    second = check_wb(database_url, settings.warehouse_schema, cipher, wb.url)
    assert [c.ok for c in second] == [c.ok for c in first]
    assert all("s ago" in c.detail for c in second)
    assert set(wb.hits.values()) == {1} and len(wb.hits) == len(WB_PING_CATEGORIES)


def test_unreachable_wb_is_a_named_failure(warehouse_conn, database_url, settings, cipher):
    cabinets.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop", TOKEN)
    checks = check_wb(database_url, settings.warehouse_schema, cipher, "http://127.0.0.1:9", categories=["statistics"])
    assert [(c.name, c.ok) for c in checks] == [("wb statistics", False)]
    assert "unreachable" in checks[0].detail


def test_health_command_exits_1_naming_the_daemon_and_the_run_workers(dagster_instance):
    result = invoke_cli("health", "--no-wb")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ok   warehouse" in result.stdout
    assert "FAIL daemon: no heartbeat" in result.stdout
    assert "FAIL run workers: no run worker has ever beaten" in result.stdout
    assert "ok   broker: broker " in result.stdout
    assert result.stderr.strip() == "error: unhealthy: daemon, run workers"


class TcpProxy:
    """A TCP forwarder to the test's PostgreSQL: ``stop()`` is the database stopping under a
    running checker (every connection refused from then on)."""

    def __init__(self, target: tuple[str, int] | str):
        import socket

        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if isinstance(self.target, str):  # a Unix socket (the embedded server's)
                upstream = socket.socket(socket.AF_UNIX)
                upstream.connect(self.target)
            else:
                upstream = socket.create_connection(self.target)
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self):
        import socket

        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(): nothing is accepted after this
        self.listener.close()
        for s in self.open:
            try:
                s.close()
            except OSError:
                pass


def test_with_the_database_stopped_health_names_each_failed_part_within_its_budget(
    dagster_instance, database_url, settings, cipher, monkeypatch
):
    from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

    from dagster import DagsterInstance

    from optima_pipelines.db.urls import dagster_storage_url
    from optima_pipelines.operations.health import CHECK_BUDGET_SECONDS

    parts = urlsplit(database_url)
    query = parse_qs(parts.query)
    if "host" in query:  # the embedded server listens on a Unix socket in that folder
        proxy = TcpProxy(f"{query.pop('host')[0]}/.s.PGSQL.{parts.port or 5432}")
        netloc = f"{parts.netloc.rsplit('@', 1)[0]}@127.0.0.1:{proxy.port}"
    else:
        proxy = TcpProxy((parts.hostname, parts.port or 5432))
        netloc = parts.netloc.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy.port}")
    proxied = urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, doseq=True)))
    monkeypatch.setenv("OPTIMA_DAGSTER_STORAGE_URL", dagster_storage_url(proxied, settings.dagster_schema))
    with DagsterInstance.get() as instance:  # the metrics process's instance, built while PostgreSQL is up
        up = {
            c.name: c.ok
            for c in run_checks(proxied, settings.warehouse_schema, lambda: instance, cipher, None, wb=False)
        }
        assert up == {"warehouse": True, "dagster storage": True, "daemon": False, "run workers": False, "broker": True}
        proxy.stop()
        down = {
            c.name: c for c in run_checks(proxied, settings.warehouse_schema, lambda: instance, cipher, None, wb=False)
        }
    assert down["warehouse"].detail.startswith(f"cannot connect to PostgreSQL at 127.0.0.1:{proxy.port}")
    # Dagster's storage retries a refused connection for about 6 s: past the probe's budget it is named.
    assert down["dagster storage"].detail == f"no answer within {CHECK_BUDGET_SECONDS:g} s"
    assert down["daemon"].detail == f"no answer within {CHECK_BUDGET_SECONDS:g} s"
    assert down["run workers"].detail.startswith(f"cannot connect to PostgreSQL at 127.0.0.1:{proxy.port}")
    assert "unreachable" in down["broker"].detail
    assert not any(c.ok for c in down.values())
