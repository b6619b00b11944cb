"""Helpers for the WB simulator's tests: a small deterministic simulator and an HTTP client for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

from wb_simulator import CabinetSpec, Simulator, serve

#: Simulated now of the tests (Moscow wall time): a Thursday afternoon.
NOW = datetime(2026, 8, 20, 15, 30)


def small_sim(seed: int = 11, *, time_scale: float = 1000.0, **spec: Any) -> Simulator:
    """One cabinet "c1" with a modest history, a pinned clock and fast rate limits."""
    options: dict[str, Any] = {"products": 12, "orders_per_day": 80, "history_days": 40}
    options.update(spec)
    return Simulator(seed=seed, cabinets=[CabinetSpec(id="c1", **options)], time_scale=time_scale, now=NOW)


class Wb:
    """A thin client for the simulator: ``wb.get("statistics", "/api/v1/supplier/orders", dateFrom=...)``."""

    def __init__(self, base_url: str, token: str | None):
        headers = {"Authorization": token} if token is not None else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=30)

    def get(self, category: str, path: str, **params: Any) -> httpx.Response:
        return self.http.get(f"/{category}{path}", params=params)

    def post(self, category: str, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        return self.http.post(f"/{category}{path}", json=body, **kwargs)

    def patch(self, category: str, path: str, body: Any) -> httpx.Response:
        return self.http.patch(f"/{category}{path}", json=body)

    def close(self) -> None:
        self.http.close()


@contextmanager
def served(sim: Simulator, token: str | None = "default") -> Iterator[tuple[str, Wb]]:
    """Serve ``sim`` and give (base URL, a client with a personal all-category token of c1)."""
    with serve(sim) as base_url:
        wb = Wb(base_url, sim.token("c1") if token == "default" else token)
        try:
            yield base_url, wb
        finally:
            wb.close()


def served_fast_small_sim() -> Iterator[tuple[Simulator, Wb]]:
    """A module's ``env`` fixture body: ``small_sim`` with rate limits a million times faster (the module
    checks answers, not pacing), served, and a client to it."""
    sim = small_sim(time_scale=1e6)
    with served(sim) as (_, wb):
        yield sim, wb
