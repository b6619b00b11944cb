"""A 429 whose pause header is absurd (inf, 10^12 s) defers for at most a day instead of crashing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from optima_pipelines.wb import WbClient, WbConfig, WbDeferred
from optima_pipelines.wb.http import MAX_PAUSE_SECONDS
from tests.fake_http import json_server

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzIjozMjc2OCwic2lkIjoiY2xpIn0.c2lnbmF0dXJl"
BODY = b'{"title":"too many requests","detail":"limited","status":429}'


@pytest.fixture
def wb_429() -> Iterator[tuple[str, dict[str, str]]]:
    headers: dict[str, str] = {}
    with json_server(lambda request: (429, headers, BODY)) as base_url:
        yield base_url, headers


@pytest.mark.parametrize("retry", ["inf", "1e12", "1e308"])
def test_an_absurd_pause_is_capped_at_a_day_and_deferred(wb_429, retry):
    base_url, headers = wb_429
    headers["X-Ratelimit-Retry"] = retry
    config = WbConfig.for_base_url(base_url, max_wait_seconds=5, backoff_base_seconds=0.001, backoff_max_seconds=0.01)
    with pytest.raises(WbDeferred) as deferred, WbClient("c1", TOKEN, config=config) as client:
        for _ in client.iter_orders(date(2026, 11, 20), flag=0):
            pass
    assert f"with a {MAX_PAUSE_SECONDS:g} s pause" in str(deferred.value)
