"""WB's rate limits as the gateway applies them: token buckets per (seller, token type, limit group).

The rows are wb-api.md §1.6 (August 2026). The group names are the ones the client uses, so that a
test can say ``sim.penalize("c1", "statistics.orders", 60)`` in the client's words.

Time: buckets refill on the *limiter clock*, which is real monotonic time multiplied by the
simulator's ``time_scale``. Every figure the simulator reports (``X-Ratelimit-Retry``,
``X-Ratelimit-Reset``) is in simulated seconds, exactly as WB would report it; a client configured
with the same time scale divides them back. With ``time_scale=60`` WB's "1 request a minute" lets
one request through every real second, and a 429 still says ``X-Ratelimit-Retry: 60``.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

MIN, HOUR, DAY = 60.0, 3600.0, 86400.0


@dataclass(frozen=True)
class Rule:
    """WB's period / limit / burst: the bucket holds ``burst`` requests and regains one every ``interval``."""

    period: float
    limit: int
    burst: int

    @property
    def interval(self) -> float:
        return self.period / self.limit


#: group → (row for Personal/Service/Base-with-secret tokens, row for plain Base tokens or None when
#: WB does not let a Base token call it).
LIMIT_GROUPS: dict[str, tuple[Rule, Rule | None]] = {
    "statistics.orders": (Rule(MIN, 1, 10), Rule(3 * HOUR, 1, 1)),
    "statistics.sales": (Rule(MIN, 1, 1), Rule(2 * HOUR, 1, 1)),
    "finance.detailed": (Rule(MIN, 1, 1), Rule(DAY, 2, 1)),
    "advert.count": (Rule(1, 5, 5), Rule(HOUR, 4, 1)),
    "advert.adverts": (Rule(1, 5, 5), Rule(HOUR, 1, 1)),
    "advert.fullstats": (Rule(MIN, 3, 1), Rule(HOUR, 1, 1)),
    "advert.bids": (Rule(1, 5, 5), Rule(HOUR, 2, 1)),
    "advert.bids_min": (Rule(MIN, 20, 5), Rule(HOUR, 5, 1)),
    "analytics.funnel": (Rule(MIN, 3, 3), Rule(HOUR, 2, 1)),
    "analytics.stocks": (Rule(MIN, 3, 1), None),
    "content": (Rule(MIN, 100, 5), Rule(MIN, 100, 5)),
    "prices": (Rule(6, 10, 5), Rule(HOUR, 4, 1)),
    "feedbacks": (Rule(1, 3, 6), Rule(HOUR, 5, 1)),
    "common.acceptance": (Rule(MIN, 6, 6), Rule(HOUR, 1, 1)),
    "common.news": (Rule(MIN, 1, 10), Rule(HOUR, 1, 1)),
    "common.seller_info": (Rule(MIN, 1, 10), Rule(DAY, 1, 1)),
}
#: /ping: at most 3 requests per 30 s, counted per host.
PING_RULE = Rule(30, 3, 3)


def rule_for(group: str, token_type: str) -> Rule | None:
    """The row that applies to ``token_type``; None when that token type may not call the group."""
    if group.startswith("ping."):
        return PING_RULE
    full, base = LIMIT_GROUPS[group]
    return base if token_type == "base" else full


def group_category(group: str) -> str:
    """The WB category a limit group belongs to (``ping.advert`` → ``advert``)."""
    if group.startswith("ping."):
        return group.split(".", 1)[1]
    return group.split(".", 1)[0]


@dataclass(frozen=True)
class Decision:
    """What the gateway does with one request: let it through (``remaining`` left) or answer 429."""

    allowed: bool
    remaining: int = 0
    retry: int = 0
    reset: int = 0
    limit: int = 0


class LimiterClock:
    """Simulated seconds for rate limits: real monotonic time times ``time_scale``."""

    def __init__(self, time_scale: float = 1.0):
        if not time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {time_scale!r}")
        self.time_scale = float(time_scale)
        self._origin = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.time_scale


class Limiter:
    """Token buckets per (seller sid, token type, group), plus penalties per (seller sid, group or category)."""

    def __init__(self, clock: LimiterClock):
        self.clock = clock
        self._lock = threading.Lock()
        # key → (tokens, last refill time)
        self._buckets: dict[tuple[str, str, str], tuple[float, float]] = {}
        # (sid, group or category) → penalty end, limiter time
        self._penalties: dict[tuple[str, str], float] = {}

    def penalize(self, sid: str, group_or_category: str, seconds: float) -> None:
        with self._lock:
            self._penalties[(sid, group_or_category)] = self.clock.now() + seconds

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()
            self._penalties.clear()

    def take(self, sid: str, token_type: str, group: str, rule: Rule) -> Decision:
        """Spend one request of the bucket, or say how long to wait (simulated seconds)."""
        with self._lock:
            now = self.clock.now()
            penalty_end = max(
                self._penalties.get((sid, group), 0.0), self._penalties.get((sid, group_category(group)), 0.0)
            )
            if penalty_end > now:
                wait = penalty_end - now
                return Decision(False, retry=_ceil(wait), reset=_ceil(wait), limit=rule.burst)
            key = (sid, token_type, group)
            tokens, last = self._buckets.get(key, (float(rule.burst), now))
            tokens = min(float(rule.burst), tokens + (now - last) / rule.interval)
            if tokens >= 1.0:
                tokens -= 1.0
                self._buckets[key] = (tokens, now)
                return Decision(True, remaining=int(tokens), limit=rule.burst)
            self._buckets[key] = (tokens, now)
            retry = (1.0 - tokens) * rule.interval
            reset = (rule.burst - tokens) * rule.interval
            return Decision(False, retry=_ceil(retry), reset=_ceil(reset), limit=rule.burst)


def _ceil(seconds: float) -> int:
    # WB sends whole seconds; never 0 while the caller still has to wait.
    return max(1, math.ceil(seconds - 1e-9))
