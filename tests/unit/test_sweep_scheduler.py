"""How a sweep schedules its cabinets (jobs/wb_sync.py ``sweep``): all of them, at most ``threads``
at once, a busy cabinet tried again after the others until its wait is over."""

from __future__ import annotations

import threading
import time
from collections import Counter

from optima_pipelines.jobs.wb_sync import BUSY, CabinetOutcome, sweep


def test_every_cabinet_once_and_never_more_than_threads_at_once():
    lock = threading.Lock()
    running = peak = 0

    def work(cabinet: str) -> CabinetOutcome:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return CabinetOutcome(cabinet, "succeeded")

    cabinets = [f"c{i}" for i in range(20)]
    outcomes = list(sweep([*cabinets, "c3"], work, threads=4, busy_wait=1))
    assert sorted(o.cabinet_id for o in outcomes) == sorted(cabinets)
    assert peak == 4


def test_a_busy_cabinet_is_tried_again_and_succeeds_once_free():
    tries: Counter[str] = Counter()

    def work(cabinet: str) -> CabinetOutcome:
        tries[cabinet] += 1
        if cabinet == "b" and tries[cabinet] < 3:
            return CabinetOutcome(cabinet, "skipped", BUSY)
        return CabinetOutcome(cabinet, "succeeded")

    outcomes = list(sweep(["a", "b", "c"], work, threads=2, busy_wait=10, retry_every=0.05))
    assert {o.cabinet_id: o.outcome for o in outcomes} == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert tries["b"] == 3
    assert [o.cabinet_id for o in outcomes][-1] == "b", "the others went first"


def test_a_cabinet_busy_for_the_whole_wait_ends_account_busy():
    tries: Counter[str] = Counter()

    def work(cabinet: str) -> CabinetOutcome:
        tries[cabinet] += 1
        return CabinetOutcome(cabinet, "skipped", BUSY) if cabinet == "b" else CabinetOutcome(cabinet, "succeeded")

    started = time.monotonic()
    outcomes = list(sweep(["a", "b"], work, threads=2, busy_wait=0.3, retry_every=0.1))
    assert {o.cabinet_id: o.outcome for o in outcomes} == {"a": "succeeded", "b": "skipped"}
    assert 2 <= tries["b"] <= 6
    assert 0.3 <= time.monotonic() - started < 3


def test_a_short_wb_pause_is_waited_out_in_the_sweep_and_a_long_one_is_left_to_the_resume_sensor():
    from datetime import UTC, datetime, timedelta

    tries: Counter[str] = Counter()

    def work(cabinet: str) -> CabinetOutcome:
        tries[cabinet] += 1
        if tries[cabinet] == 1:
            pause = 0.2 if cabinet == "short" else 3600.0
            resume_at = datetime.now(UTC) + timedelta(seconds=pause)
            return CabinetOutcome(cabinet, "deferred", "WB: one request a minute", resume_at=resume_at)
        return CabinetOutcome(cabinet, "succeeded")

    started = time.monotonic()
    outcomes = list(sweep(["short", "long"], work, threads=2, busy_wait=1, resume_within=60))
    final = {o.cabinet_id: o.outcome for o in outcomes if o.final}
    assert final == {"short": "succeeded", "long": "deferred"}
    assert [o.outcome for o in outcomes if o.cabinet_id == "short"] == ["deferred", "succeeded"]
    assert not next(o for o in outcomes if o.cabinet_id == "short").final
    assert tries == {"short": 2, "long": 1}
    assert time.monotonic() - started >= 0.2
