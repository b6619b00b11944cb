"""WB's documented rate limits (wb-api.md §1.6, the August 2026 rows) as data.

WB meters requests per seller account in *limit groups*: one method (``statistics.orders``), or a
whole category that shares one bucket (``prices``, ``feedbacks``). Each group has a row per token
type: Personal, Service and Base-with-secret tokens share the full limits; plain Base tokens get
much lower ones (and some methods not at all). A row is WB's period / limit / burst: the bucket
holds ``burst`` requests and refills one every ``period / limit`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_TYPES = ("personal", "service", "base_with_secret", "base", "test")


@dataclass(frozen=True)
class LimitRule:
    period_seconds: float
    limit: int
    burst: int

    @property
    def interval(self) -> float:
        """Seconds between two requests at the sustained rate (WB's "interval")."""
        return self.period_seconds / self.limit

    def scaled(self, time_scale: float) -> LimitRule:
        return LimitRule(self.period_seconds / time_scale, self.limit, self.burst)


def _r(period: float, limit: int, burst: int) -> LimitRule:
    return LimitRule(float(period), limit, burst)


MIN, HOUR, DAY = 60, 3600, 86400

#: group → (full row for personal/service/base-with-secret/test, row for a plain Base token or None
#: when WB does not allow Base tokens to call it at all).
LIMIT_GROUPS: dict[str, tuple[LimitRule, LimitRule | None]] = {
    "statistics.orders": (_r(MIN, 1, 10), _r(3 * HOUR, 1, 1)),
    "statistics.sales": (_r(MIN, 1, 1), _r(2 * HOUR, 1, 1)),
    "finance.detailed": (_r(MIN, 1, 1), _r(DAY, 2, 1)),
    "advert.count": (_r(1, 5, 5), _r(HOUR, 4, 1)),
    "advert.adverts": (_r(1, 5, 5), _r(HOUR, 1, 1)),
    "advert.fullstats": (_r(MIN, 3, 1), _r(HOUR, 1, 1)),
    "advert.bids": (_r(1, 5, 5), _r(HOUR, 2, 1)),
    "advert.bids_min": (_r(MIN, 20, 5), _r(HOUR, 5, 1)),
    "analytics.funnel": (_r(MIN, 3, 3), _r(HOUR, 2, 1)),
    "analytics.stocks": (_r(MIN, 3, 1), None),
    "content": (_r(MIN, 100, 5), _r(MIN, 100, 5)),
    "prices": (_r(6, 10, 5), _r(HOUR, 4, 1)),
    "feedbacks": (_r(1, 3, 6), _r(HOUR, 5, 1)),
    "common.acceptance": (_r(MIN, 6, 6), _r(HOUR, 1, 1)),
    "common.news": (_r(MIN, 1, 10), _r(HOUR, 1, 1)),
    "common.seller_info": (_r(MIN, 1, 10), _r(DAY, 1, 1)),
}
#: /ping: 3 requests per 30 s, counted per host, whatever the token.
PING_RULE = _r(30, 3, 3)


def ping_group(category: str) -> str:
    return f"ping.{category}"


def rule_for(group: str, token_type: str) -> LimitRule | None:
    """The limit row of ``group`` for ``token_type``; None when that token type may not call it."""
    if group.startswith("ping."):
        return PING_RULE
    full, base = LIMIT_GROUPS[group]
    return base if token_type == "base" else full
