"""Health checks name the failing part, and WB's /ping is asked at most 2 times per 30 s per host."""

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from optima_pipelines import cabinets
from optima_pipelines.db.migrate import head_revision
from optima_pipelines.ops.health import WB_PING_HOSTS, check_wb, run_checks
from optima_pipelines.secrets import TokenCipher, load_key

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzaWQiOiJoZWFsdGgifQ.c2lnbmF0dXJl"


class FakeWbPing:
    """WB's /ping on localhost: 200 with the right token, 401 on the host named ``rejecting``."""

    def __init__(self, rejecting: str):
        self.hits: Counter[str] = Counter()
        self.tokens: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                host = self.path.strip("/").split("/")[0]
                outer.hits[host] += 1
                outer.tokens.add(self.headers.get("Authorization", ""))
                status = 401 if host == rejecting else 200
                body = json.dumps({"TS": "2026-11-30T10:00:00+03:00", "Status": "OK"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def wb():
    fake = FakeWbPing(rejecting="advert-api")
    yield fake
    fake.close()


@pytest.fixture
def cipher(settings):
    return TokenCipher(load_key(settings))


def test_without_a_daemon_the_daemon_check_fails_and_names_it(dagster_instance, database_url, settings, cipher):
    checks = {c.name: c for c in run_checks(database_url, settings.warehouse_schema, dagster_instance, cipher, None)}
    assert checks["warehouse"].ok and head_revision() in checks["warehouse"].detail
    assert checks["dagster storage"].ok
    assert not checks["daemon"].ok
    assert "no heartbeat from" in checks["daemon"].detail and "SENSOR" in checks["daemon"].detail
    assert checks["wb"].ok and "no active cabinet has a token" in checks["wb"].detail


def test_wb_pings_use_a_cabinet_token_name_the_failing_host_and_reuse_recent_answers(
    warehouse_conn, database_url, settings, cipher, wb
):
    cabinets.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop", TOKEN)
    first = check_wb(database_url, settings.warehouse_schema, cipher, wb.url)
    assert {c.name: c.ok for c in first} == {f"wb {h}": h != "advert-api" for h in WB_PING_HOSTS}
    failing = next(c for c in first if not c.ok)
    assert "token rejected (401)" in failing.detail and TOKEN not in failing.detail
    assert wb.tokens == {TOKEN}

    # Asked again at once (a second checker, a probe loop): WB is not asked again, the answer is reused.
    second = check_wb(database_url, settings.warehouse_schema, cipher, wb.url)
    assert [c.ok for c in second] == [c.ok for c in first]
    assert all("s ago" in c.detail for c in second)
    assert set(wb.hits.values()) == {1} and len(wb.hits) == len(WB_PING_HOSTS)


def test_unreachable_wb_is_a_named_failure(warehouse_conn, database_url, settings, cipher):
    cabinets.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop", TOKEN)
    checks = check_wb(database_url, settings.warehouse_schema, cipher, "http://127.0.0.1:9", hosts=["statistics-api"])
    assert [(c.name, c.ok) for c in checks] == [("wb statistics-api", False)]
    assert "unreachable" in checks[0].detail


def test_health_command_exits_1_naming_the_daemon(dagster_instance):
    result = subprocess.run(
        [sys.executable, "-m", "optima_pipelines.cli", "health", "--no-wb"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ok   warehouse" in result.stdout
    assert "FAIL daemon: no heartbeat" in result.stdout
    assert result.stderr.strip() == "error: unhealthy: daemon"
