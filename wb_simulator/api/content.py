"""content-api: the cards list, paged by the cursor ``{updatedAt, nmID}``; stop when ``total < limit``."""

from __future__ import annotations

from typing import Any

from wb_simulator import rows
from wb_simulator.api.base import BadJson, Request, Response, endpoint, envelope


def _bad(text: str) -> Response:
    body = envelope(None, error=True, text=text)
    body["additionalErrors"] = None
    return Response(400, body)


@endpoint("content", "POST", "/content/v2/get/cards/list", "content")
def cards_list(req: Request) -> Response:
    try:
        settings = req.json_object().get("settings", {})
    except BadJson:
        return _bad("Request body can not be decoded")
    if not isinstance(settings, dict):
        return _bad("Request body can not be decoded")
    cursor = settings.get("cursor") or {}
    flt = settings.get("filter") or {}
    sort = settings.get("sort") or {}
    if not isinstance(cursor, dict) or not isinstance(flt, dict) or not isinstance(sort, dict):
        return _bad("Request body can not be decoded")
    limit = cursor.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
        return _bad("cursor.limit must be from 1 to 100")
    ascending = bool(sort.get("ascending", False))
    text = str(flt.get("textSearch") or "").strip().lower()
    brands = flt.get("brands") or []
    subjects = flt.get("objectIDs") or []
    imt = flt.get("imtID") or 0
    with_photo = flt.get("withPhoto", -1)
    cards: list[dict[str, Any]] = []
    for p in req.cabinet.products:
        if with_photo == 2:  # "only without photo": every simulated card has one
            continue
        if (
            (brands and p.brand not in brands)
            or (subjects and p.subject_id not in subjects)
            or (imt and p.imt_id != imt)
        ):
            continue
        if text and text not in p.vendor_code.lower() and text not in p.title.lower() and text != str(p.nm_id):
            continue
        cards.append(rows.card(p))
    cards.sort(key=lambda c: (c["updatedAt"], c["nmID"]), reverse=not ascending)
    after_at, after_nm = cursor.get("updatedAt"), cursor.get("nmID")
    if after_at and after_nm:
        mark = (str(after_at), int(after_nm))
        cards = [
            c
            for c in cards
            if ((c["updatedAt"], c["nmID"]) > mark) == ascending and (c["updatedAt"], c["nmID"]) != mark
        ]
    page = cards[:limit]
    last = page[-1] if page else None
    return Response(
        200,
        {
            "cards": page,
            "cursor": {
                "updatedAt": last["updatedAt"] if last else (after_at or ""),
                "nmID": last["nmID"] if last else (after_nm or 0),
                "total": len(page),
            },
        },
    )
