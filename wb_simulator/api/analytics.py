"""seller-analytics-api: the sales funnel (v3) and the WB-warehouses stocks report."""

from __future__ import annotations

from datetime import date
from typing import Any

from wb_simulator import views
from wb_simulator.api.base import BadJson, Request, Response, endpoint
from wb_simulator.timefmt import date_to_dn, day_number, dn_to_date
from wb_simulator.world import Product

ORDER_FIELDS = {
    "openCard": "openCount",
    "addToCart": "cartCount",
    "orderCount": "orderCount",
    "orderSum": "orderSum",
    "buyoutCount": "buyoutCount",
    "buyoutSum": "buyoutSum",
    "cancelCount": "cancelCount",
    "cancelSum": "cancelSum",
    "avgPrice": "avgPrice",
    "shareOrderPercent": "shareOrderPercent",
    "addToWishlist": "addToWishlist",
}


def _bad(req: Request, detail: str) -> Response:
    return Response(
        400,
        {
            "title": "Invalid request body",
            "detail": detail,
            "requestId": req.request_id(),
            "origin": "analytics-open-api",
        },
    )


def _period(value: Any, name: str) -> tuple[int, int] | str:
    if not isinstance(value, dict):
        return f"{name}: field required"
    try:
        start, end = date.fromisoformat(str(value.get("start"))), date.fromisoformat(str(value.get("end")))
    except ValueError:
        return f"{name}: start and end must be dates (YYYY-MM-DD)"
    if end < start:
        return f"{name}: end is before start"
    return date_to_dn(start), date_to_dn(end)


def _uint_list(body: dict[str, Any], name: str, most: int | None = None) -> list[int] | str:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return f"{name}: an array of integers expected"
    if most is not None and len(value) > most:
        return f"{name}: at most {most} items"
    return value


def _product_head(p: Product) -> dict[str, Any]:
    return {
        "nmId": p.nm_id,
        "title": p.title,
        "vendorCode": p.vendor_code,
        "brandName": p.brand,
        "subjectId": p.subject_id,
        "subjectName": p.subject_name,
    }


def _stat(f: dict[str, int], first: int, last: int, all_orders_k: int) -> dict[str, Any]:
    days = max(1, last - first + 1)  # a period after today (clamped to it) has no day yet: no orders
    order_sum = views.rubles(f["order_k"])
    buyout_sum = views.rubles(f["buyout_k"])
    return {
        "period": {"start": dn_to_date(first).isoformat(), "end": dn_to_date(last).isoformat()},
        "openCount": f["opens"],
        "cartCount": f["carts"],
        "orderCount": f["orders"],
        "orderSum": order_sum,
        "buyoutCount": f["buyouts"],
        "buyoutSum": buyout_sum,
        "cancelCount": f["cancels"],
        "cancelSum": views.rubles(f["cancel_k"]),
        "avgPrice": order_sum // f["orders"] if f["orders"] else 0,
        "avgOrdersCountPerDay": round(f["orders"] / days, 2),
        "shareOrderPercent": round(f["order_k"] * 100 / all_orders_k, 2) if all_orders_k else 0,
        "addToWishlist": f["wishlist"],
        "timeToReady": {"days": 1, "hours": 4, "mins": 30},
        "localizationPercent": 80,
        "wbClub": {
            "orderCount": 0,
            "orderSum": 0,
            "buyoutSum": 0,
            "buyoutCount": 0,
            "cancelSum": 0,
            "cancelCount": 0,
            "avgPrice": 0,
            "buyoutPercent": 0,
            "avgOrderCountPerDay": 0,
        },
        "conversions": {
            "addToCartPercent": views.pct(f["carts"], f["opens"]),
            "cartToOrderPercent": views.pct(f["orders"], f["carts"]),
            "buyoutPercent": views.pct(f["buyouts"], f["buyouts"] + f["cancels"] + f["returns"]),
        },
    }


def _dynamic(now: int | float, before: int | float) -> int:
    return int((now - before) * 100 // before) if before else 0


def _comparison(sel: dict[str, Any], past: dict[str, Any]) -> dict[str, Any]:
    keys = ("openCount", "cartCount", "orderCount", "orderSum", "buyoutCount", "buyoutSum", "cancelCount", "cancelSum")
    out: dict[str, Any] = {f"{k}Dynamic": _dynamic(sel[k], past[k]) for k in keys}
    out.update(
        avgOrdersCountPerDayDynamic=_dynamic(sel["avgOrdersCountPerDay"], past["avgOrdersCountPerDay"]),
        avgPriceDynamic=_dynamic(sel["avgPrice"], past["avgPrice"]),
        shareOrderPercentDynamic=_dynamic(sel["shareOrderPercent"], past["shareOrderPercent"]),
        addToWishlistDynamic=_dynamic(sel["addToWishlist"], past["addToWishlist"]),
        timeToReadyDynamic={"days": 0, "hours": 0, "mins": 0},
        localizationPercentDynamic=0,
        wbClubDynamic={k: 0 for k in sel["wbClub"]},
        conversions={
            k: sel["conversions"][k] - past["conversions"][k]
            for k in ("addToCartPercent", "cartToOrderPercent", "buyoutPercent")
        },
    )
    return out


def _body_and_period(req: Request, days_back: int, too_old: str) -> tuple[dict[str, Any], int, int] | Response:
    """The JSON body and its selectedPeriod (first, last Moscow day, last clamped to today)."""
    try:
        body = req.json_object()
    except BadJson as exc:
        return _bad(req, f"code=400, message={exc}")
    today = day_number(req.t)
    selected = _period(body.get("selectedPeriod"), "selectedPeriod")
    if isinstance(selected, str):
        return _bad(req, f"code=400, message=invalid: {selected}")
    if selected[0] < today - days_back:
        return _bad(req, f"code=400, message=invalid: selectedPeriod: {too_old}")
    return body, selected[0], min(selected[1], today)


@endpoint("analytics", "POST", "/api/analytics/v3/sales-funnel/products", "analytics.funnel")
def funnel_products(req: Request) -> Response:
    parsed = _body_and_period(req, 365, "data is kept for the last 365 days")
    if isinstance(parsed, Response):
        return parsed
    body, first, last = parsed
    today = day_number(req.t)
    past: tuple[int, int] | None = None
    if body.get("pastPeriod") is not None:
        asked = _period(body["pastPeriod"], "pastPeriod")
        if isinstance(asked, str):
            return _bad(req, f"code=400, message=invalid: {asked}")
        past = (max(asked[0], today - 365), min(asked[1], today))
    nm_ids = _uint_list(body, "nmIds", 1000)
    subject_ids = _uint_list(body, "subjectIds")
    tag_ids = _uint_list(body, "tagIds")
    for value in (nm_ids, subject_ids, tag_ids):
        if isinstance(value, str):
            return _bad(req, f"code=400, message=invalid: {value}")
    brands = body.get("brandNames") or []
    limit, offset = body.get("limit", 50), body.get("offset", 0)
    if not isinstance(limit, int) or not 0 <= limit <= 1000:
        return _bad(req, "code=400, message=invalid: limit: must be from 0 to 1000")
    if not isinstance(offset, int) or offset < 0:
        return _bad(req, "code=400, message=invalid: offset: must not be negative")
    order_by = body.get("orderBy") or {"field": "openCard", "mode": "desc"}
    sort_key = (
        ORDER_FIELDS.get(order_by.get("field", "openCard"), "openCount") if isinstance(order_by, dict) else "openCount"
    )
    descending = not (isinstance(order_by, dict) and order_by.get("mode") == "asc")

    cab = req.cabinet
    products = [
        p
        for p in cab.products
        if (not nm_ids or p.nm_id in nm_ids)
        and (not brands or p.brand in brands)
        and (not subject_ids or p.subject_id in subject_ids)
        and not tag_ids  # the simulator's cards carry no tags
    ]
    sel_counts = views.funnel_period(cab, first, last, req.t)
    all_k = sum(f["order_k"] for f in sel_counts.values())
    past_counts = views.funnel_period(cab, past[0], past[1], req.t) if past else None
    past_all_k = sum(f["order_k"] for f in past_counts.values()) if past_counts else 0
    stock: dict[int, int] = {}
    for row in views.stocks(cab, req.t):
        stock[row["nmId"]] = stock.get(row["nmId"], 0) + row["quantity"]
    items = []
    for p in products:
        sel = _stat(sel_counts[p.nm_id], first, last, all_k)
        statistic: dict[str, Any] = {"selected": sel}
        if past_counts is not None and past is not None:
            before = _stat(past_counts[p.nm_id], past[0], past[1], past_all_k)
            statistic["past"] = before
            statistic["comparison"] = _comparison(sel, before)
        head = _product_head(p)
        head.update(
            tags=[],
            productRating=4.7,
            feedbackRating=4.6,
            stocks={"wb": stock.get(p.nm_id, 0), "mp": 0, "balanceSum": stock.get(p.nm_id, 0) * p.price},
        )
        items.append({"product": head, "statistic": statistic})
    items.sort(key=lambda i: i["product"]["nmId"])
    items.sort(key=lambda i: i["statistic"]["selected"][sort_key], reverse=descending)
    return Response(200, {"data": {"products": items[offset : offset + limit], "currency": "RUB"}})


@endpoint("analytics", "POST", "/api/analytics/v3/sales-funnel/products/history", "analytics.funnel")
def funnel_history(req: Request) -> Response:
    parsed = _body_and_period(req, 7, "only the last week is available")
    if isinstance(parsed, Response):
        return parsed
    body, first, last = parsed
    nm_ids = _uint_list(body, "nmIds", 20)
    if isinstance(nm_ids, str) or not nm_ids:
        return _bad(req, "code=400, message=invalid: nmIds: from 1 to 20 items required")
    level = body.get("aggregationLevel", "day")
    if level not in ("day", "week"):
        return _bad(req, "code=400, message=invalid: aggregationLevel: day or week")
    cab = req.cabinet
    per_day = {dn: views.funnel_counts(cab, dn, req.t) for dn in range(first, last + 1)}
    out = []
    for nm in nm_ids:
        p = cab.by_nm.get(nm)
        if p is None:
            continue
        buckets: dict[int, dict[str, int]] = {}
        for dn in range(first, last + 1):
            key = dn if level == "day" else max(first, dn - (dn + 3) % 7)
            acc = buckets.setdefault(key, views.empty_counts())
            for k, v in per_day[dn].get(nm, {}).items():
                acc[k] += v
        history = [{"date": dn_to_date(key).isoformat(), **views.history_item(f)} for key, f in sorted(buckets.items())]
        out.append({"product": _product_head(p), "history": history, "currency": "RUB"})
    return Response(200, out)


@endpoint(
    "analytics",
    "POST",
    "/api/analytics/v1/stocks-report/wb-warehouses",
    "analytics.stocks",
    token_types={"personal", "service"},
)
def stocks_report(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson as exc:
        return _bad(req, f"code=400, message={exc}")
    nm_ids = _uint_list(body, "nmIds", 1000)
    chrt_ids = _uint_list(body, "chrtIds")
    for value in (nm_ids, chrt_ids):
        if isinstance(value, str):
            return _bad(req, f"code=400, message=invalid: {value}")
    limit, offset = body.get("limit", 250_000), body.get("offset", 0)
    if not isinstance(limit, int) or not 1 <= limit <= 250_000:
        return _bad(req, "code=400, message=invalid: limit: must be from 1 to 250000")
    if not isinstance(offset, int) or offset < 0:
        return _bad(req, "code=400, message=invalid: offset: must not be negative")
    items = [
        row
        for row in views.stocks(req.cabinet, req.t)
        if (not nm_ids or row["nmId"] in nm_ids) and (not chrt_ids or row["chrtId"] in chrt_ids)
    ]
    return Response(200, {"data": {"items": items[offset : offset + limit]}})
