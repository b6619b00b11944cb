"""Where the WB client sends requests and how patient it is.

WB serves each API category on its own host. ``OPTIMA_WB_BASE_URL`` replaces all of them by one
base URL with the category as a path prefix (``{base}/{category}{path}``), which is how the WB
simulator is addressed in tests and the demo; unset, the real hosts are used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from urllib.parse import urlsplit

from optima_pipelines.errors import ConfigError
from optima_pipelines.settings import float_env

#: Category (the simulator's path prefix) → WB's production host.
WB_HOSTS: Mapping[str, str] = MappingProxyType(
    {
        "statistics": "https://statistics-api.wildberries.ru",
        "finance": "https://finance-api.wildberries.ru",
        "advert": "https://advert-api.wildberries.ru",
        "analytics": "https://seller-analytics-api.wildberries.ru",
        "content": "https://content-api.wildberries.ru",
        "prices": "https://discounts-prices-api.wildberries.ru",
        "feedbacks": "https://feedbacks-api.wildberries.ru",
        "common": "https://common-api.wildberries.ru",
        "supplies": "https://supplies-api.wildberries.ru",
    }
)
CATEGORIES = tuple(WB_HOSTS)


def _check_url(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{what} must be an http(s) URL such as http://127.0.0.1:8123, got {url!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{what} must not carry a query or fragment, got {url!r}")
    return url.rstrip("/")


@dataclass(frozen=True)
class WbConfig:
    """Base URLs, timeouts, retry bounds and the deferral threshold of a WB client.

    ``time_scale`` > 1 divides every WB rate-limit period and pause by that factor: only for a WB
    simulator that runs its clock faster (tests, the demo); against WB it must stay 1.
    """

    base_urls: Mapping[str, str] = field(default_factory=lambda: WB_HOSTS)
    #: A wait for the rate limiter longer than this raises WbDeferred instead of sleeping (ADR-0051).
    max_wait_seconds: float = 5.0
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    #: Attempts per request, first included, for reads (writes: see WbClient).
    max_attempts: int = 6
    #: Exponential backoff with full jitter: base * 2**n, capped; plus a cap on total retry time.
    backoff_base_seconds: float = 0.5
    backoff_max_seconds: float = 16.0
    retry_budget_seconds: float = 120.0
    #: After a write failed in a way WB may still be acting on (a timeout, a 5xx), wait this long
    #: before reading WB's state to decide whether to resend.
    write_settle_seconds: float = 3.0
    #: How often, and how long at most, wait_price_task polls WB.
    poll_interval_seconds: float = 2.0
    time_scale: float = 1.0
    user_agent: str = "optima-pipelines"

    def __post_init__(self) -> None:
        missing = [c for c in CATEGORIES if c not in self.base_urls]
        if missing:
            raise ConfigError(f"WbConfig.base_urls lacks categories: {', '.join(missing)}")
        if self.time_scale < 1:
            raise ConfigError(f"WbConfig.time_scale must be at least 1, got {self.time_scale}")
        if self.max_attempts < 1:
            raise ConfigError(f"WbConfig.max_attempts must be at least 1, got {self.max_attempts}")
        if self.max_wait_seconds < 0:
            raise ConfigError(f"WbConfig.max_wait_seconds must not be negative, got {self.max_wait_seconds}")

    @classmethod
    def for_base_url(cls, base_url: str, **kwargs: object) -> WbConfig:
        """Every category at ``{base_url}/{category}`` (the simulator's routing)."""
        base = _check_url(base_url, "the WB base URL")
        return cls(base_urls=MappingProxyType({c: f"{base}/{c}" for c in CATEGORIES}), **kwargs)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, **kwargs: object) -> WbConfig:
        """OPTIMA_WB_BASE_URL → every category under that URL; unset → WB's real hosts.
        OPTIMA_WB_TIME_SCALE → ``time_scale`` (default 1)."""
        kwargs.setdefault("time_scale", float_env("OPTIMA_WB_TIME_SCALE", minimum=1.0))
        base = (os.environ.get("OPTIMA_WB_BASE_URL") or "").strip()
        if base:
            return cls.for_base_url(base, **kwargs)
        return cls(**kwargs)  # type: ignore[arg-type]

    def url(self, category: str, path: str) -> str:
        return f"{self.base_urls[category]}{path}"

    def with_changes(self, **changes: object) -> WbConfig:
        return replace(self, **changes)  # type: ignore[arg-type]
