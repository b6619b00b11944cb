"""common-api (news, acceptance coefficients, seller info) and ``/ping`` on every category."""

from __future__ import annotations

from datetime import date

from wb_simulator.api.base import Request, Response, endpoint, gateway_error
from wb_simulator.timefmt import date_to_dn, msk_offset
from wb_simulator.tokens import CATEGORY_BITS

CATEGORIES = (*CATEGORY_BITS, "common")


def _ping(req: Request) -> Response:
    return Response(200, {"TS": msk_offset(req.t), "Status": "OK"})


for _category in CATEGORIES:
    endpoint(_category, "GET", "/ping", f"ping.{_category}")(_ping)


def _bad(req: Request, detail: str, origin: str) -> Response:
    return Response(
        400, {"status": 400, "title": "bad request", "detail": detail, "requestId": req.request_id(), "origin": origin}
    )


@endpoint("common", "GET", "/api/communications/v2/news", "common.news")
def news(req: Request) -> Response:
    raw_from, raw_id = req.query.get("from"), req.query.get("fromID")
    if not raw_from and not raw_id:
        return _bad(req, "one of the parameters from or fromID is required", "news-api")
    try:
        from_dn = date_to_dn(date.fromisoformat(raw_from)) if raw_from else None
        from_id = int(raw_id) if raw_id else None
    except ValueError:
        return _bad(req, "from must be YYYY-MM-DD and fromID an integer", "news-api")
    return Response(200, {"data": req.sim.news.select(req.t, from_dn, from_id)})


@endpoint("common", "GET", "/api/tariffs/v1/acceptance/coefficients", "common.acceptance")
def acceptance_coefficients(req: Request) -> Response:
    if req.sim.slots.disabled:
        return gateway_error(
            req.sim,
            404,
            "method disabled",
            "the method is temporarily disabled: https://dev.wildberries.ru/release-notes?id=570",
            "Not Found",
        )
    raw = req.query.get("warehouseIDs")
    wanted: set[int] | None = None
    if raw:
        try:
            wanted = {int(x) for x in raw.split(",")}
        except ValueError:
            return _bad(req, "Неверный формат warehouseIDs", "supply-api")
    return Response(200, req.sim.slots.coefficients(req.t, wanted))


@endpoint("common", "GET", "/api/v1/seller-info", "common.seller_info")
def seller_info(req: Request) -> Response:
    cab = req.cabinet
    return Response(200, {"name": cab.name, "sid": cab.sid, "tin": cab.tin, "tradeMark": cab.name.removeprefix("ИП ")})
