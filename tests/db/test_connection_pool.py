"""A run's pooled warehouse connections (db/connection.py ``Pool``, used by the Warehouse resource in
a run): a connection comes back as a fresh session of the same server process, a cabinet lock is
released when its work ends, and a server that does not answer is named."""

# No "from __future__ import annotations": Dagster reads the op's resource type from its live annotation.
import time
from collections import Counter

import psycopg
import pytest
from dagster import job, op

from optima_pipelines.db import connection
from optima_pipelines.db.connection import Pool, connect
from optima_pipelines.errors import DatabaseUnavailable
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.warehouse.cabinet_lock import CabinetLock, held


@pytest.fixture
def pool(optima_env, database_url):
    pool = Pool(database_url, f"optima_{optima_env}", application_name="optima_pipelines/test", size=2)
    yield pool
    pool.close()


def test_a_returned_connection_is_the_same_server_process_as_a_fresh_session(optima_env, database_url):
    pool = Pool(database_url, f"optima_{optima_env}", application_name="optima_pipelines/test", size=1)
    try:
        check_fresh_session(pool, optima_env)
    finally:
        pool.close()


def check_fresh_session(pool: Pool, optima_env: str) -> None:
    with pool.connect() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        conn.execute("SET statement_timeout = 1234")
        conn.execute("SET search_path = public")
        conn.execute("CREATE TEMP TABLE scratch (x int)")
        conn.execute("SELECT pg_advisory_lock(1, 2)")
    with pool.connect() as conn:
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == pid, "the pool opened a new session"
        assert not conn.autocommit
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "0"
        assert conn.execute("SHOW search_path").fetchone()[0] == f"optima_{optima_env}"
        assert conn.execute("SHOW application_name").fetchone()[0] == "optima_pipelines/test"
        assert conn.execute("SELECT to_regclass('pg_temp.scratch')").fetchone()[0] is None
        held_locks = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        ).fetchone()[0]
        assert held_locks == 0


def test_past_its_size_the_pool_hands_out_plain_connections_instead_of_waiting(pool):
    with pool.connect() as a, pool.connect() as b, pool.connect() as c:  # the pool keeps two sessions
        pids = {x.execute("SELECT pg_backend_pid()").fetchone()[0] for x in (a, b, c)}
    assert len(pids) == 3 and pool.stats()["overflow"] == 1
    assert c.closed and not a.closed, "the plain connection outlived its block, or a pooled one was closed"


def test_a_with_block_commits_or_rolls_back_then_returns_the_connection(pool):
    with pool.connect() as conn:
        conn.execute("CREATE TABLE pooled (x int)")
    with pytest.raises(RuntimeError), pool.connect() as conn:
        conn.execute("INSERT INTO pooled VALUES (1)")
        raise RuntimeError("the work failed")
    with pool.connect() as conn, pool.connect() as other:  # both of the pool's two: none was left out
        conn.execute("INSERT INTO pooled VALUES (2)")
        assert other.execute("SELECT count(*) FROM pooled").fetchone()[0] == 0  # not committed yet
    with pool.connect() as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM pooled")] == [2]


def test_a_cabinet_lock_on_a_pooled_connection_is_released_when_its_work_ends(optima_env, database_url, monkeypatch):
    def plain():
        return connect(database_url, f"optima_{optima_env}")

    # The pool resets a returned connection in its background thread, which a busy machine runs late:
    # here a second late. The lock is released when its work ends all the same, not when the reset runs.
    reset = connection._reset
    monkeypatch.setattr(connection, "_reset", lambda conn: (time.sleep(1), reset(conn)))
    pool = Pool(database_url, f"optima_{optima_env}", application_name="optima_pipelines/test", size=2)
    cabinet = f"pool-{optima_env}"  # advisory locks are the database's: a name no other test locks
    try:
        with held(pool.connect, cabinet, 1):
            assert not CabinetLock(plain, cabinet).try_acquire()
        other = CabinetLock(plain, cabinet)
        assert other.try_acquire(), "the cabinet stayed locked after its work returned the connection"
        other.close()
    finally:
        pool.close()


def test_a_server_that_does_not_answer_is_named_without_the_password():
    url = "postgresql://optima:s3cret-pw@127.0.0.1:1/optima"
    pool = Pool(url, "optima_x", application_name="t", size=1)
    try:
        with pytest.raises(DatabaseUnavailable) as failure:
            pool.connect()
    finally:
        pool.close()
    assert "127.0.0.1:1" in str(failure.value) and "s3cret-pw" not in str(failure.value)


def test_a_runs_connections_come_from_its_pool_and_are_closed_when_it_ends(optima_env, database_url, dagster_instance):
    seen: list[int] = []

    @op
    def work(warehouse: Warehouse) -> None:
        for _ in range(10):
            with warehouse.connect() as conn:
                seen.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])

    @job(name="pool_probe")
    def probe() -> None:
        work()

    result = probe.execute_in_process(
        instance=dagster_instance, resources={"warehouse": Warehouse(database_url=database_url, env=optima_env)}
    )
    assert result.success
    # Ten connects one after the other reuse the pool's sessions (it may open a spare while one is out).
    assert Counter(seen).most_common(1)[0][1] >= 5, f"connect() opened a session of its own each time: {seen}"
    with psycopg.connect(database_url.replace("postgresql+psycopg2", "postgresql")) as admin:
        left = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'optima_pipelines/pool_probe'"
        ).fetchone()[0]
    assert left == 0, "the run's pooled connections outlived it"
