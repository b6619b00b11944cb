"""finance-api: the realization report detail, ``POST /api/finance/v1/sales-reports/detailed``.

Body ``{dateFrom, dateTo, limit ≤ 100000, rrdId, period daily|weekly, fields?}``: lines with rrDate in
[dateFrom, dateTo] and rrdId > the given one, in rrdId order (at most ``limit``, and at most
``sim.finance_page_cap`` when set); 204 when there are none. (The v5
``reportDetailByPeriod`` of statistics-api is switched off: it is not routed and answers 404.)
A cabinet with ``disorder`` pages WB's untidy way: short pages, a line repeated, a follow-on page
failing (``wb_simulator.disorder``).
"""

from __future__ import annotations

from typing import Any

import orjson

from wb_simulator.api.base import PROBLEM, BadJson, Request, Response, endpoint
from wb_simulator.faults import truncated
from wb_simulator.timefmt import day_number, parse_wb_datetime


def _bad(req: Request, detail: str) -> Response:
    return Response(
        400,
        {
            "status": 400,
            "title": "GetReportDetailByPeriodNB decode error",
            "detail": f"GetReportDetailByPeriodNB decode error: {detail}",
            "requestId": req.request_id(),
            "origin": "open-api-finreports",
        },
        PROBLEM,
    )


@endpoint("finance", "POST", "/api/finance/v1/sales-reports/detailed", "finance.detailed")
def detailed(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson as exc:
        return _bad(req, str(exc))
    for name in ("dateFrom", "dateTo"):
        if not body.get(name):
            return _bad(req, f"missing {name} params")
    start, end = parse_wb_datetime(str(body["dateFrom"])), parse_wb_datetime(str(body["dateTo"]))
    if start is None or end is None:
        return _bad(req, "dateFrom and dateTo must be RFC 3339 dates")
    limit, rrd_id, period = body.get("limit", 100_000), body.get("rrdId", 0), body.get("period", "weekly")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100_000:
        return _bad(req, "limit must be an integer from 1 to 100000")
    if not isinstance(rrd_id, int) or isinstance(rrd_id, bool) or rrd_id < 0:
        return _bad(req, "rrdId must be a non-negative integer")
    if period not in ("daily", "weekly"):
        return _bad(req, "period must be daily or weekly")
    fields = body.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        return _bad(req, "fields must be an array of field names")
    ledger = req.sim.ledgers[req.cabinet.id]
    first, last = day_number(start), day_number(end)
    lines = ledger.select(first, last, rrd_id, min(limit, req.sim.finance_page_cap or limit), req.t, period)
    truncate = False
    if ledger.pages is not None:  # wb_simulator.disorder: pages WB's way, not the tidy way
        named = ledger.select(first, last, rrd_id - 1, 1, req.t, period) if rrd_id else []
        previous = named[0] if named and named[0].rrd_id == rrd_id else None
        page = ledger.pages.shape(lines, previous, follow_on=rrd_id > 0)
        if page.status != 200:
            return Response(page.status, page.body)
        lines, truncate = page.lines, page.truncate
    if not lines:
        return Response(204)
    out: list[dict[str, Any]] = [ledger.render(line, period) for line in lines]
    if fields:
        wanted = set(fields)
        out = [{k: v for k, v in row.items() if k in wanted} for row in out]
    if truncate:
        return Response(200, raw=truncated(orjson.dumps(out)))
    return Response(200, out)
