"""The cabinet lock (warehouse/cabinet_lock.py) on the real PostgreSQL: one holder per cabinet across
sessions and processes, released on close and when the holder's process is killed."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time

import pytest

from optima_pipelines.db.connection import connect
from optima_pipelines.warehouse.cabinet_lock import CabinetBusy, CabinetLock, held, lock_key

# Advisory locks are the database's, not a schema's: the other pytest workers' tests on this database
# lock cabinets too, so these tests' cabinets have names no other test uses.
C1, C2 = f"lock-{secrets.token_hex(4)}-1", f"lock-{secrets.token_hex(4)}-2"


@pytest.fixture
def connector(optima_env, database_url):
    return lambda: connect(database_url, f"optima_{optima_env}")


def test_one_holder_per_cabinet_and_other_cabinets_are_free(connector):
    with held(connector, C1, 1):
        assert not CabinetLock(connector, C1).try_acquire()
        other = CabinetLock(connector, C2)
        assert other.try_acquire()
        other.close()
    again = CabinetLock(connector, C1)
    assert again.try_acquire(), "the lock was not released when its holder closed"
    again.close()


def test_a_waiting_run_is_seen_by_the_holder_and_gets_the_lock_when_it_is_released(connector):
    holder = held(connector, C1, 1)
    assert not holder.waited_for()
    a_waiter_sees_it_and_gets_it_when_released(holder, connector)


def a_waiter_sees_it_and_gets_it_when_released(holder: CabinetLock, connector) -> None:  # type: ignore[no-untyped-def]
    """A run waiting for the cabinet: the holder sees it, and it gets the lock once the holder lets go."""
    got: list[float] = []

    def waiter() -> None:
        with held(connector, holder.cabinet_id, 30):
            got.append(time.monotonic())

    thread = threading.Thread(target=waiter)
    thread.start()
    deadline = time.monotonic() + 10
    while not holder.waited_for():
        assert time.monotonic() < deadline, "the holder never saw the waiting run"
        time.sleep(0.05)
    released = time.monotonic()
    holder.close()
    thread.join(10)
    assert got and got[0] >= released


def test_a_run_that_may_not_wait_longer_fails_busy_naming_the_cabinet(connector):
    with held(connector, C1, 1):
        started = time.monotonic()
        with pytest.raises(CabinetBusy, match=f"cabinet {C1} is busy"):
            held(connector, C1, 0.3)
        assert time.monotonic() - started < 5


def test_a_killed_holder_releases_the_cabinet(connector, database_url, optima_env):
    code = (
        "import sys, time\n"
        "from optima_pipelines.db.connection import connect\n"
        "from optima_pipelines.warehouse.cabinet_lock import held\n"
        f"lock = held(lambda: connect({database_url!r}, 'optima_{optima_env}'), {C1!r}, 5)\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert not CabinetLock(connector, C1).try_acquire()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # PostgreSQL ends the killed process's session (its socket closed) and with it the lock.
        with held(connector, C1, 10):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_keys_are_stable_signed_int4():
    keys = {lock_key(f"cabinet-{i}") for i in range(2000)}
    assert all(-(2**31) <= k < 2**31 for k in keys)
    assert len(keys) == 2000
    # The same key in every process and release (CRC-32): a new worker waits for an old one's lock.
    assert lock_key("c1") == 1591159457 and lock_key("12345") == -873121252


def test_a_sweeps_session_holds_many_cabinets_each_once_and_releases_them(connector):
    from optima_pipelines.warehouse.cabinet_lock import LockSession

    with LockSession(connector) as session:
        c1, c2 = session.lock(C1), session.lock(C2)
        assert c1.try_acquire() and c2.try_acquire()
        assert not session.lock(C1).try_acquire(), "the session took a cabinet it already holds"
        assert not CabinetLock(connector, C1).try_acquire(), "another session took a held cabinet"
        c1.close()
        other = CabinetLock(connector, C1)
        assert other.try_acquire(), "c1 stayed locked after its work released it"
        other.close()
        assert not CabinetLock(connector, C2).try_acquire()
    again = CabinetLock(connector, C2)
    assert again.try_acquire(), "closing the session did not release its cabinets"
    again.close()


def test_a_run_waiting_behind_a_sweeps_cabinet_is_seen_and_gets_it_when_released(connector):
    from optima_pipelines.warehouse.cabinet_lock import LockSession

    with LockSession(connector) as session:
        lock = session.lock(C1)
        assert lock.try_acquire() and not lock.waited_for()
        a_waiter_sees_it_and_gets_it_when_released(lock, connector)
