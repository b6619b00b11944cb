"""WB client errors: a gateway that quotes the token back, errors crossing process boundaries."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

import pytest

from optima_pipelines.wb import (
    MemoryLimiterStore,
    RateLimiter,
    WbAuthError,
    WbClient,
    WbConfig,
    WbDeferred,
    WbRequestError,
    WbResponseError,
    WbUnavailable,
)
from tests.fake_http import Answer, json_server

TOKEN = "eyJhbGciOiJFUzI1NiIsImtpZCI6IjIwMjUwOTA0djEifQ.eyJhY2MiOjMsImVudCI6MSwiZXhwIjoxfQ.c2VjcmV0LXNpZ25hdHVyZS1wYXJ0"


def _echo(request: BaseHTTPRequestHandler) -> Answer:
    """A careless gateway: its 401 and 400 bodies quote the Authorization header back."""
    status = 401 if "orders" in request.path else 400
    quoted = request.headers.get("Authorization", "")
    body = json.dumps({"title": "unauthorized", "detail": f"token is malformed: {quoted}", "status": status})
    return status, {}, body.encode()


@pytest.fixture
def echo_url() -> Iterator[str]:
    with json_server(_echo) as url:
        yield url


def test_a_token_quoted_back_by_wb_is_taken_out_of_our_errors(echo_url: str):
    with WbClient("c1", TOKEN, config=WbConfig.for_base_url(echo_url), limiter=RateLimiter(MemoryLimiterStore())) as c:
        with pytest.raises(WbAuthError) as auth:
            list(c.iter_orders(datetime(2026, 8, 1), flag=1))
        with pytest.raises(WbRequestError) as refused:
            c.acceptance_coefficients()
    for err in (auth.value, refused.value):
        text = str(err)
        assert "token is malformed: Bearer <token>" in text
        assert TOKEN not in text and TOKEN.split(".")[2] not in text


@pytest.mark.parametrize(
    "error",
    [
        WbAuthError(cabinet_id="c1", endpoint="GET statistics /x", status=401, detail="token expired"),
        WbResponseError(cabinet_id="c1", endpoint="GET statistics /x", problem="Expected `int`", field="$[0].nmId"),
        WbRequestError(
            cabinet_id="c1", endpoint="PATCH advert /bids", status=400, detail="wrong bid value: 3; min: 150"
        ),
        WbUnavailable(
            cabinet_id="c1", endpoint="POST prices /t", attempts=6, last_error="HTTP 503", outcome_unknown=True
        ),
        WbDeferred("c1", "statistics.sales", datetime(2026, 8, 1, 12, tzinfo=UTC), "WB allows 1 request(s) per 1 min"),
    ],
)
def test_errors_survive_pickling_with_their_details(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert again.__dict__ == error.__dict__ and again.is_transient == error.is_transient
