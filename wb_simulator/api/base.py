"""What every endpoint module shares: the request and response objects, the registry, WB's error bodies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from wb_simulator.timefmt import utc_z

if TYPE_CHECKING:
    from wb_simulator.simulator import Simulator
    from wb_simulator.tokens import TokenInfo
    from wb_simulator.world import Cabinet

JSON = "application/json; charset=utf-8"
PROBLEM = "application/problem+json"


class BadJson(Exception):
    """The request body is not the JSON the method expects."""


@dataclass
class Request:
    sim: Simulator
    method: str
    category: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    token: TokenInfo
    cabinet: Cabinet
    t: int  # simulated now, Unix seconds

    def json(self) -> Any:
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise BadJson("invalid JSON body") from None

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; BadJson (with a message for the 400) otherwise."""
        body = self.json()
        if not isinstance(body, dict):
            raise BadJson("body must be a JSON object")
        return body

    def request_id(self) -> str:
        return self.sim.next_request_id()


@dataclass
class Response:
    status: int = 200
    body: Any = None
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # already-encoded body (faults)

    def encoded(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.status == 204:
            return b""
        return orjson.dumps(self.body)


Handler = Callable[[Request], Response]


@dataclass(frozen=True)
class Endpoint:
    category: str
    method: str
    path: str
    group: str
    handler: Handler
    write: bool = False
    #: None: every token type; else the ones WB lets call it.
    token_types: frozenset[str] | None = None


ENDPOINTS: dict[tuple[str, str, str], Endpoint] = {}


def endpoint(
    category: str, method: str, path: str, group: str, *, write: bool = False, token_types: set[str] | None = None
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        key = (category, method, path)
        if key in ENDPOINTS:
            raise RuntimeError(f"endpoint registered twice: {key}")
        ENDPOINTS[key] = Endpoint(
            category, method, path, group, fn, write, None if token_types is None else frozenset(token_types)
        )
        return fn

    return register


# -- WB's error bodies --------------------------------------------------------------------------


def gateway_error(sim: Simulator, status: int, title: str, detail: str, status_text: str) -> Response:
    """The gateway's problem body (401, 403, 404, 429), as in every WB spec's components."""
    request_id = sim.next_request_id()
    return Response(
        status,
        {
            "title": title,
            "detail": detail,
            "code": f"07e4668e-{request_id[:12]}-[UK-sim]",
            "requestId": request_id,
            "origin": "s2s-api-auth-catalog",
            "status": status,
            "statusText": status_text,
            "timestamp": utc_z(sim.now_ts()),
        },
        PROBLEM,
    )


def not_found(sim: Simulator) -> Response:
    return gateway_error(
        sim, 404, "path not found", "Please consult the https://dev.wildberries.ru/openapi/api-information", "Not Found"
    )


def envelope(data: Any, *, error: bool = False, text: str = "", feedbacks: bool = False) -> dict[str, Any]:
    """The prices/feedbacks envelope ``{data, error, errorText[, additionalErrors]}``."""
    body: dict[str, Any] = {"data": data, "error": error, "errorText": text}
    if feedbacks:
        body["additionalErrors"] = None
    return body


def int_param(query: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    """An integer query parameter; raises ValueError naming it when it is not one."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}: {raw!r} is not an integer") from None
