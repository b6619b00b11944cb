"""The HTTP side: WB's gateway (routing, tokens, limits, faults) in front of the methods, and ``/__sim``.

A request to ``/{category}{wb path}`` goes through what WB's gateway does, in WB's order: route
(404 for a path WB does not serve, including switched-off methods), token (401), token type (403 for
a method the token type may not call), rate limit (429 with ``X-Ratelimit-Retry/Limit/Reset``),
then the method, whose answer carries ``X-Ratelimit-Remaining``. Injected faults apply after the
rate limit, as a failing backend behind a working gateway would.

``/__sim/…`` is the control surface for tests and the demo out of process (JSON in, JSON out, no
auth: the simulator listens on localhost).
"""

from __future__ import annotations

import time
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HttpRequest
from starlette.responses import Response as HttpResponse
from starlette.routing import Route

from wb_simulator.api import ENDPOINTS, Endpoint, Request, Response
from wb_simulator.api.base import gateway_error, not_found
from wb_simulator.faults import ENVELOPE_ERROR_TEXT, Fault, hold, server_error_body, truncated
from wb_simulator.limits import Decision, rule_for
from wb_simulator.simulator import Simulator
from wb_simulator.tokens import TokenInfo, TokenRejected

METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE"]


def _http(resp: Response, extra: dict[str, str] | None = None) -> HttpResponse:
    headers = {**resp.headers, **(extra or {})}
    body = resp.encoded()
    return HttpResponse(body, status_code=resp.status, headers=headers, media_type=resp.content_type if body else None)


def _throttled(sim: Simulator, decision: Decision) -> HttpResponse:
    resp = gateway_error(sim, 429, "too many requests", f"limited by {sim.next_request_id()[:8]}", "Too Many Requests")
    return _http(
        resp,
        {
            "X-Ratelimit-Retry": str(decision.retry),
            "X-Ratelimit-Limit": str(decision.limit),
            "X-Ratelimit-Reset": str(decision.reset),
        },
    )


def _corrupt(value: Any) -> bool:
    """Give the first row found the wrong JSON types (numbers as strings, strings as numbers)."""
    if isinstance(value, list):
        return any(_corrupt(v) for v in value[:1])
    if not isinstance(value, dict):
        return False
    scalars = [k for k, v in value.items() if isinstance(v, int | float | str) and not isinstance(v, bool)]
    if not scalars:
        return any(_corrupt(v) for v in value.values() if isinstance(v, list | dict))
    for k in scalars:
        v = value[k]
        value[k] = len(v) if isinstance(v, str) else str(v)
    return True


def _run(sim: Simulator, ep: Endpoint, info: TokenInfo, http: HttpRequest, body: bytes, fault: Fault) -> Response:
    with sim.lock:
        t = sim.sync()
        req = Request(
            sim=sim,
            method=ep.method,
            category=ep.category,
            path=ep.path,
            query=http.query_params,
            headers=http.headers,
            body=body,
            token=info,
            cabinet=sim.cabinets[info.cabinet_id],
            t=t,
        )
        resp = ep.handler(req)
    if resp.status == 200 and fault.kind == "wrong_types" and resp.body is not None:
        _corrupt(resp.body)
    if resp.status == 200 and fault.rewrite is not None:
        rewritten = fault.rewrite(resp.body)
        if isinstance(rewritten, bytes):
            resp.raw = rewritten
            return resp
        resp.body = rewritten
    raw = resp.encoded()
    if resp.status == 200 and fault.kind == "truncate":
        raw = truncated(raw)
    resp.raw = raw
    return resp


def create_app(sim: Simulator) -> Starlette:
    """The ASGI app serving ``sim``."""

    async def gateway(http: HttpRequest) -> HttpResponse:
        category = http.path_params["category"]
        path = "/" + http.path_params["path"]
        ep = ENDPOINTS.get((category, http.method, path))
        if ep is None:
            return _http(not_found(sim))
        try:
            info = sim.tokens.authorize(http.headers.get("authorization"), category, now=sim.now_ts(), write=ep.write)
        except TokenRejected as exc:
            return _http(gateway_error(sim, 401, "unauthorized", exc.detail, "Unauthorized"))
        rule = rule_for(ep.group, info.token_type)
        if rule is None or (ep.token_types is not None and info.token_type not in ep.token_types):
            detail = f"the method is not available for a {info.token_type} token"
            return _http(gateway_error(sim, 403, "forbidden", detail, "Forbidden"))
        started = time.time()
        try:
            return await served(ep, info, rule, category, path, http)
        finally:
            sim.journal.record(info.cabinet_id, http.method, f"{category}{path}", started, time.time())

    async def served(
        ep: Endpoint, info: TokenInfo, rule: Any, category: str, path: str, http: HttpRequest
    ) -> HttpResponse:
        decision = sim.limiter.take(info.sid, info.token_type, ep.group, rule)
        if not decision.allowed:
            return _throttled(sim, decision)
        remaining = {"X-Ratelimit-Remaining": str(decision.remaining)}
        fault = sim.faults.decide(http.method, f"{category}{path}")
        if fault.latency_s:
            await hold(fault)
        if fault.kind == "error_rate":
            return _http(Response(fault.status, server_error_body(fault.status)), remaining)
        if fault.kind == "rate_429":
            return _throttled(sim, Decision(False, retry=1, reset=1, limit=rule.burst))
        if fault.kind == "empty_204":
            return _http(Response(204), remaining)
        if fault.kind == "malformed":
            return _http(Response(200, raw=b"<html><body><h1>502 Bad Gateway</h1></body></html>"), remaining)
        if fault.kind == "envelope_error":
            failed = {"data": None, "error": True, "errorText": ENVELOPE_ERROR_TEXT, "additionalErrors": None}
            return _http(Response(200, failed), remaining)
        resp = await run_in_threadpool(_run, sim, ep, info, http, await http.body(), fault)
        if fault.kind == "lost_reply":  # the method ran; its answer is lost on the way back
            lost = {"title": "internal server error", "detail": "upstream timeout", "status": fault.status}
            return _http(Response(fault.status, lost), remaining)
        return _http(resp, remaining)

    return Starlette(routes=[*admin_routes(sim), Route("/{category}/{path:path}", gateway, methods=METHODS)])


# -- /__sim: the control surface ----------------------------------------------------------------


def _json(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(
        orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS),
        status_code=status,
        media_type="application/json; charset=utf-8",
    )


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def admin_routes(sim: Simulator) -> list[Route]:
    def handler(fn: Any) -> Any:
        async def endpoint(http: HttpRequest) -> HttpResponse:
            raw = await http.body()
            try:
                args = orjson.loads(raw) if raw else {}
                if not isinstance(args, dict):
                    raise ValueError("the body must be a JSON object")
                return _json(await run_in_threadpool(fn, args, http.path_params))
            except (ValueError, KeyError, TypeError) as exc:
                return _json({"error": str(exc) if not isinstance(exc, KeyError) else str(exc.args[0])}, 400)

        return endpoint

    def info(_: dict[str, Any], __: dict[str, Any]) -> dict[str, Any]:
        return {
            "now": sim.now().isoformat(),
            "seed": sim.seed,
            "time_scale": sim.time_scale,
            "cabinets": [{"id": c.id, "name": c.name, "sid": c.sid} for c in sim.cabinets.values()],
        }

    def token(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        return {
            "token": sim.token(
                args["cabinet_id"],
                categories=args.get("categories"),
                token_type=args.get("token_type", "personal"),
                expired=bool(args.get("expired", False)),
                read_only=bool(args.get("read_only", False)),
            )
        }

    def revoke(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        sim.revoke(args["token"])
        return {"revoked": True}

    def advance(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        delta = timedelta(
            days=args.get("days", 0),
            hours=args.get("hours", 0),
            minutes=args.get("minutes", 0),
            seconds=args.get("seconds", 0),
        )
        return {"now": sim.advance(delta).isoformat()}

    def faults(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        pattern = args.pop("pattern")
        sim.faults.set(pattern, **args)
        return {"rules": len(sim.faults.rules)}

    def clear_faults(_: dict[str, Any], __: dict[str, Any]) -> dict[str, Any]:
        sim.faults.clear()
        return {"rules": 0}

    def penalize(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        sim.penalize(args["cabinet_id"], args["group"], float(args["seconds"]))
        return {"penalized": True}

    def cancel_order(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        return sim.cancel_order(args["cabinet_id"], args["srid"])

    def return_sale(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        return sim.return_sale(args["cabinet_id"], args["srid"])

    def add_feedback(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        fid = sim.add_feedback(
            args["cabinet_id"], int(args["nm_id"]), args.get("text", "Хороший товар"), int(args.get("valuation", 5))
        )
        return {"id": fid}

    def add_question(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": sim.add_question(args["cabinet_id"], int(args["nm_id"]), args.get("text", "Есть ли другие размеры?"))
        }

    def open_slot(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        sim.open_slot(
            int(args["warehouse_id"]),
            date.fromisoformat(args["day"]),
            int(args.get("coefficient", 0)),
            args.get("box_type_id"),
            bool(args.get("allow_unload", True)),
        )
        return {"opened": True}

    def coefficients(args: dict[str, Any], _: dict[str, Any]) -> dict[str, Any]:
        sim.set_coefficients_disabled(bool(args.get("disabled", True)))
        return {"disabled": sim.slots.disabled}

    def summary(_: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        return sim.truth.summary(params["cabinet_id"])

    def day_totals(_: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        return sim.truth.day_totals(params["cabinet_id"], date.fromisoformat(params["day"]))

    def writes(_: dict[str, Any], __: dict[str, Any]) -> list[dict[str, Any]]:
        with sim.lock:
            return [
                {
                    "kind": w.kind,
                    "cabinet_id": w.cabinet_id,
                    "at": w.at.isoformat(),
                    "payload": w.payload,
                    "result": w.result,
                }
                for w in sim.writes
            ]

    return [
        Route("/__sim", handler(info), methods=["GET"]),
        Route("/__sim/tokens", handler(token), methods=["POST"]),
        Route("/__sim/revoke", handler(revoke), methods=["POST"]),
        Route("/__sim/advance", handler(advance), methods=["POST"]),
        Route("/__sim/faults", handler(faults), methods=["POST"]),
        Route("/__sim/faults", handler(clear_faults), methods=["DELETE"]),
        Route("/__sim/penalize", handler(penalize), methods=["POST"]),
        Route("/__sim/cancel-order", handler(cancel_order), methods=["POST"]),
        Route("/__sim/return-sale", handler(return_sale), methods=["POST"]),
        Route("/__sim/feedbacks", handler(add_feedback), methods=["POST"]),
        Route("/__sim/questions", handler(add_question), methods=["POST"]),
        Route("/__sim/slots", handler(open_slot), methods=["POST"]),
        Route("/__sim/coefficients", handler(coefficients), methods=["POST"]),
        Route("/__sim/truth/{cabinet_id}/summary", handler(summary), methods=["GET"]),
        Route("/__sim/truth/{cabinet_id}/days/{day}", handler(day_totals), methods=["GET"]),
        Route("/__sim/writes", handler(writes), methods=["GET"]),
    ]
