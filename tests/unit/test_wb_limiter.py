"""The WB rate limiter's token bucket: bursts, pacing, pauses, deferral, wait_time, threads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from optima_pipelines.wb import LimitRule, MemoryLimiterStore, RateLimiter, WbDeferred
from optima_pipelines.wb.limits import LIMIT_GROUPS, rule_for

T0 = 1_800_000_000.0


class FakeClock:
    """Time that moves only when someone sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limiter(clock: FakeClock) -> RateLimiter:
    return RateLimiter(MemoryLimiterStore(), clock=clock, sleep=clock.sleep)


ORDERS = LimitRule(60, 1, 10)  # WB's statistics orders row: 1 a minute, burst 10


def test_a_full_bucket_lets_the_burst_through_then_paces_at_the_interval(limiter: RateLimiter, clock: FakeClock):
    waits = [limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=1000) for _ in range(12)]
    assert waits[:10] == [0] * 10
    assert waits[10] == pytest.approx(60)
    assert waits[11] == pytest.approx(60)
    assert clock.now == pytest.approx(T0 + 120)


def test_a_long_wait_defers_before_taking_the_slot(limiter: RateLimiter, clock: FakeClock):
    for _ in range(10):
        limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5)
    with pytest.raises(WbDeferred) as caught:
        limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5, endpoint="GET statistics /x")
    err = caught.value
    assert err.resume_at == datetime.fromtimestamp(T0 + 60, UTC)
    assert err.group == "statistics.orders" and err.cabinet_id == "c1" and err.is_transient
    assert "1 request(s) per 1 min, burst 10" in str(err)
    assert clock.slept == []
    # Deferring spent nothing: the wait is still a minute, and a minute later one request goes.
    assert limiter.wait_time("c1", "statistics.orders") == pytest.approx(60)
    clock.now += 60
    assert limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5) == 0


def test_short_waits_are_slept(limiter: RateLimiter, clock: FakeClock):
    rule = LimitRule(1, 5, 5)  # 5 a second, burst 5: 200 ms apart once the burst is spent
    for _ in range(7):
        limiter.acquire("c1", "advert.bids", rule, max_wait=5)
    assert clock.slept == pytest.approx([0.2, 0.2], abs=1e-5)


def test_buckets_are_per_cabinet_and_group(limiter: RateLimiter):
    rule = LimitRule(60, 1, 1)
    limiter.acquire("c1", "statistics.sales", rule, max_wait=0)
    assert limiter.wait_time("c1", "statistics.sales") == pytest.approx(60)
    assert limiter.wait_time("c2", "statistics.sales") == 0
    assert limiter.wait_time("c1", "finance.detailed") == 0
    limiter.acquire("c2", "statistics.sales", rule, max_wait=0)


def test_a_pause_from_wb_is_waited_out_and_explained(limiter: RateLimiter, clock: FakeClock):
    limiter.record_pause("c1", "statistics.orders", ORDERS, 30, "WB answered 429 with a 30 s pause")
    assert limiter.wait_time("c1", "statistics.orders") == pytest.approx(30)
    with pytest.raises(WbDeferred, match="WB answered 429 with a 30 s pause"):
        limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5)
    clock.now += 30
    assert limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5) == 0
    # WB's bucket was empty at the 429: after the pause, the sustained rate, not a fresh burst.
    assert limiter.wait_time("c1", "statistics.orders") == pytest.approx(60)


def test_wb_counting_fewer_requests_left_drains_our_bucket(limiter: RateLimiter):
    limiter.acquire("c1", "statistics.orders", ORDERS, max_wait=5)
    assert limiter.wait_time("c1", "statistics.orders") == 0
    limiter.observe_remaining("c1", "statistics.orders", ORDERS, 0)
    assert limiter.wait_time("c1", "statistics.orders") == pytest.approx(60)
    # A higher count than ours never speeds us up.
    limiter.observe_remaining("c1", "statistics.orders", ORDERS, 10)
    assert limiter.wait_time("c1", "statistics.orders") == pytest.approx(60)


def test_threads_never_share_a_slot(clock: FakeClock):
    slept: list[float] = []
    lock = threading.Lock()

    def sleep(seconds: float) -> None:
        with lock:
            slept.append(seconds)

    limiter = RateLimiter(MemoryLimiterStore(), clock=clock, sleep=sleep)
    rule = LimitRule(1, 10, 5)
    barrier = threading.Barrier(20)

    def worker() -> None:
        barrier.wait()
        limiter.acquire("c1", "feedbacks", rule, max_wait=100)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The clock stood still: 5 went at once, the other 15 got distinct slots 100 ms apart.
    assert sorted(slept) == pytest.approx([0.1 * k for k in range(1, 16)], abs=1e-5)


def test_the_process_wide_store_is_shared_by_every_limiter():
    a, b = RateLimiter(), RateLimiter()
    assert a.store is b.store
    rule = LimitRule(60, 1, 1)
    a.acquire("shared-cabinet", "statistics.sales", rule, max_wait=0)
    assert b.wait_time("shared-cabinet", "statistics.sales") > 55


def test_limit_rows_follow_the_token_type():
    assert rule_for("statistics.orders", "personal") == LimitRule(60, 1, 10)
    assert rule_for("statistics.orders", "service") == LimitRule(60, 1, 10)
    assert rule_for("statistics.orders", "base") == LimitRule(3 * 3600, 1, 1)
    assert rule_for("analytics.stocks", "base") is None
    assert rule_for("ping.advert", "base") == LimitRule(30, 3, 3)
    assert LimitRule(60, 3, 1).interval == 20
    assert LimitRule(60, 1, 10).scaled(60) == LimitRule(1, 1, 10)
    assert set(LIMIT_GROUPS) >= {"statistics.sales", "finance.detailed", "prices", "feedbacks", "common.news"}
