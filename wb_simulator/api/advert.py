"""advert-api: campaigns, their statistics (``/adv/v3/fullstats``) and bids (kopecks)."""

from __future__ import annotations

from datetime import date
from typing import Any

from wb_simulator import views
from wb_simulator.api.base import BadJson, Request, Response, endpoint
from wb_simulator.timefmt import date_to_dn, day_number, msk_offset
from wb_simulator.world import Cabinet, Campaign, min_bid

NOT_DELETED = "2100-01-01T00:00:00+03:00"
MAX_IDS = 50
MAX_DAYS = 31


def _bad(req: Request, detail: str) -> Response:
    return Response(
        400,
        {
            "detail": detail,
            "origin": "camp-api-public-cache",
            "request_id": req.request_id(),
            "status": 400,
            "title": "invalid payload",
        },
    )


def advert_info(c: Campaign, cab: Cabinet) -> dict[str, Any]:
    """A campaign as ``GET /api/advert/v2/adverts`` shows it."""
    return {
        "bid_type": c.bid_type,
        "currency": "RUB",
        "id": c.advert_id,
        "nm_settings": [
            {
                "bids_kopecks": {"search": c.bids[nm]["search"], "recommendations": c.bids[nm]["recommendations"]},
                "nm_id": nm,
                "subject": {"id": cab.by_nm[nm].subject_id, "name": cab.by_nm[nm].subject_name},
            }
            for nm in c.nm_ids
        ],
        "restrictions": {"can_change_nms": c.status in (4, 9, 11)},
        "settings": {"payment_type": c.payment_type, "name": c.name, "placements": dict(c.placements)},
        "status": c.status,
        "timestamps": {
            "created": msk_offset(c.created_ts),
            "updated": msk_offset(c.updated_ts),
            "started": None if c.started_ts is None else msk_offset(c.started_ts),
            "deleted": msk_offset(c.updated_ts) if c.status == -1 else NOT_DELETED,
        },
    }


def _ids(raw: str | None) -> list[int] | None:
    if not raw:
        return None
    try:
        return [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        return None


@endpoint("advert", "GET", "/adv/v1/promotion/count", "advert.count")
def promotion_count(req: Request) -> Response:
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for c in req.cabinet.campaigns:
        groups.setdefault((9, c.status), []).append({"advertId": c.advert_id, "changeTime": msk_offset(c.updated_ts)})
    adverts = [
        {"type": typ, "status": status, "count": len(items), "advert_list": items}
        for (typ, status), items in sorted(groups.items())
    ]
    return Response(200, {"adverts": adverts or None, "all": len(req.cabinet.campaigns)})


@endpoint("advert", "GET", "/api/advert/v2/adverts", "advert.adverts")
def adverts(req: Request) -> Response:
    cab = req.cabinet
    wanted = None
    if req.query.get("ids"):
        wanted = _ids(req.query.get("ids"))
        if wanted is None or len(wanted) > MAX_IDS:
            return _bad(req, "invalid ids value")
    statuses = None
    if req.query.get("statuses"):
        statuses = _ids(req.query.get("statuses"))
        if statuses is None:
            return _bad(req, "invalid statuses value")
    payment = req.query.get("payment_type")
    if payment is not None and payment not in ("cpm", "cpc"):
        return _bad(req, "invalid payment_type value")
    found = [
        advert_info(c, cab)
        for c in cab.campaigns
        if (wanted is None or c.advert_id in wanted)
        and (statuses is None or c.status in statuses)
        and (payment is None or c.payment_type == payment)
    ]
    return Response(200, {"adverts": found})


@endpoint("advert", "GET", "/adv/v3/fullstats", "advert.fullstats")
def fullstats(req: Request) -> Response:
    ids = _ids(req.query.get("ids"))
    if not ids or len(ids) > MAX_IDS:
        return _bad(req, "invalid ids")
    try:
        begin = date.fromisoformat(req.query.get("beginDate", ""))
        end = date.fromisoformat(req.query.get("endDate", ""))
    except ValueError:
        return _bad(req, "invalid beginDate or endDate: expected YYYY-MM-DD")
    if end < begin:
        return _bad(req, "invalid period: endDate is before beginDate")
    if (end - begin).days + 1 > MAX_DAYS:
        body = _bad(req, "").body
        body.pop("detail")
        body.update(errors=[{"detail": "max date range 31 days", "field": "begin and end"}], title="Invalid payload")
        body["type"] = "bad request"
        return Response(400, body)
    today = day_number(req.t)
    first, last = date_to_dn(begin), min(date_to_dn(end), today - 1)
    if first >= today:
        return _bad(req, "there are no statistics for this advertising period")
    out = []
    for advert_id in ids:
        c = req.cabinet.campaign(advert_id)
        if c is None or c.status not in (7, 9, 11):
            continue
        row = views.fullstats(req.cabinet, c, first, last, req.t)
        if row is not None:
            out.append(views.strip_private(row))
    return Response(200, out)


@endpoint("advert", "PATCH", "/api/advert/v1/bids", "advert.bids", write=True)
def set_bids(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson as exc:
        return _bad(req, str(exc))
    items = body.get("bids")
    if not isinstance(items, list) or not items or len(items) > MAX_IDS:
        return _bad(req, "bids: from 1 to 50 campaigns expected")
    changes: list[tuple[Campaign, int, str, int]] = []
    for item in items:
        advert_id = item.get("advert_id") if isinstance(item, dict) else None
        c = req.cabinet.campaign(advert_id) if isinstance(advert_id, int) else None
        if c is None:
            return _bad(req, f"advert {advert_id} not found")
        if c.status not in (4, 9, 11):
            return _bad(req, f"advert {advert_id}: bids cannot be changed in status {c.status}")
        nm_bids = item.get("nm_bids")
        if not isinstance(nm_bids, list) or not nm_bids or len(nm_bids) > MAX_IDS:
            return _bad(req, f"advert {advert_id}: nm_bids: from 1 to 50 items expected")
        for nm_bid in nm_bids:
            if not isinstance(nm_bid, dict):
                return _bad(req, f"advert {advert_id}: invalid nm_bids item")
            nm, bid, placement = nm_bid.get("nm_id"), nm_bid.get("bid_kopecks"), nm_bid.get("placement")
            if not isinstance(nm, int) or nm not in c.nm_ids:
                return _bad(req, f"advert {advert_id}: nm {nm} is not in the campaign")
            allowed = ("combined",) if c.bid_type == "unified" else ("search", "recommendations")
            if not isinstance(placement, str) or placement not in allowed:
                return _bad(req, f"advert {advert_id}: placement {placement!r} is not valid for a {c.bid_type} bid")
            if not isinstance(bid, int) or isinstance(bid, bool):
                return _bad(req, f"wrong bid value: {bid}")
            floor = min_bid(c.payment_type, nm, placement)
            if bid < floor:
                return _bad(req, f"wrong bid value: {bid}; min: {floor}")
            changes.append((c, nm, placement, bid))
    for c, nm, placement, bid in changes:
        for key in ("search", "recommendations") if placement == "combined" else (placement,):
            c.bids[nm][key] = bid
        if placement in ("combined", "search"):
            c.bid_history.setdefault(nm, []).append((req.t, bid))
        c.updated_ts = req.t
    result = {"bids": body["bids"], "currency": "RUB"}
    req.sim.record("bids", req.cabinet.id, body, result)
    return Response(200, result)


@endpoint("advert", "POST", "/api/advert/v1/bids/min", "advert.bids_min")
def min_bids(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson as exc:
        return _bad(req, str(exc))
    advert_id = body.get("advert_id")
    c = req.cabinet.campaign(advert_id) if isinstance(advert_id, int) else None
    if c is None:
        return _bad(req, f"advert {advert_id} not found")
    nm_ids, payment, placements = body.get("nm_ids"), body.get("payment_type"), body.get("placement_types")
    if not isinstance(nm_ids, list) or not 1 <= len(nm_ids) <= 100 or not all(isinstance(n, int) for n in nm_ids):
        return _bad(req, "nm_ids: from 1 to 100 product ids expected")
    if payment not in ("cpm", "cpc"):
        return _bad(req, "invalid payment_type value")
    valid = ("combined", "search", "recommendation")
    if not isinstance(placements, list) or not placements or any(p not in valid for p in placements):
        return _bad(req, "invalid placement_types value")
    out = [
        {
            "nm_id": nm,
            "bids": [
                {
                    "type": p,
                    "value": min_bid(payment, nm, p),
                    "currency": "RUB",
                }
                for p in placements
            ],
        }
        for nm in nm_ids
    ]
    return Response(200, {"bids": out})
