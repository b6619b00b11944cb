"""Basic auth in front of the Dagster UI: what gets through and what gets a 401 (the ASGI layer alone)."""

import asyncio
import base64

import httpx
import pytest

from optima_pipelines.errors import ConfigError
from optima_pipelines.operations.webserver import BasicAuthMiddleware, Credentials

CREDENTIALS = Credentials("ops", "pässword:with-colon")


async def dagster_stand_in(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"dagster " + scope["path"].encode()})


def request(method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        app = BasicAuthMiddleware(dagster_stand_in, CREDENTIALS)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ui") as c:
            return await c.request(method, path, headers=headers)

    return asyncio.run(go())


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize("path", ["/", "/graphql", "/assets/x", "/static/main.js", "/server_info"])
def test_every_route_needs_the_credentials(path):
    refused = request("GET", path)
    allowed = request("GET", path, basic("ops", "pässword:with-colon"))
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic realm=")
    assert "dagster" not in refused.text
    assert allowed.status_code == 200 and allowed.text == f"dagster {path}"


@pytest.mark.parametrize(
    "headers",
    [
        basic("ops", "wrong"),
        basic("OPS", "pässword:with-colon"),
        basic("ops", "pässword"),
        {"Authorization": "Basic not-base64!!"},
        {"Authorization": "Bearer " + base64.b64encode(b"ops:p").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
    ],
)
def test_wrong_or_malformed_credentials_are_refused(headers):
    response = request("POST", "/graphql", headers)
    assert response.status_code == 401


def test_half_configured_auth_is_an_error_not_an_open_ui():
    assert Credentials.from_settings(None, None) is None
    with pytest.raises(ConfigError, match="OPTIMA_UI_PASSWORD is not set"):
        Credentials.from_settings("ops", None)
    with pytest.raises(ConfigError, match="OPTIMA_UI_USER is not set"):
        Credentials.from_settings(None, "secret")
    assert "pässword" not in repr(CREDENTIALS)
