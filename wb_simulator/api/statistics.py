"""statistics-api: orders and sales (with returns) feeds.

``flag=0`` (default): rows whose lastChangeDate ≥ dateFrom, ordered by it, about 80,000 per
response; the next page starts at the last row's lastChangeDate (rows at that instant repeat; a
page holding only those is answered ``[]``: see ``world._page``).
``flag=1``: every row whose ``date`` is on dateFrom's Moscow day. ``[]`` when nothing is left.
Rows are kept 90 days after the order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wb_simulator import rows
from wb_simulator.api.base import Request, Response, endpoint
from wb_simulator.timefmt import day_number, day_start, parse_wb_datetime

#: WB's "conditional limit" of rows per flag=0 response.
PAGE_ROWS = 80_000


def _orders(req: Request, since: int, flag: int) -> list[dict[str, Any]]:
    cab, t = req.cabinet, req.t
    keep = req.sim.retention_from(t)
    if flag:
        found = [o for o in cab.orders_of_day(day_number(since), t) if cab.visible(o, t, keep)]
    else:
        found = cab.orders_changed_since(since, t, keep, PAGE_ROWS)
    return [rows.order_row(o, t) for o in found]


def _sales(req: Request, since: int, flag: int) -> list[dict[str, Any]]:
    cab, t = req.cabinet, req.t
    keep = req.sim.retention_from(t)
    if flag:
        dn = day_number(since)
        found = [(o, k) for o, k in cab.sales_between(day_start(dn), day_start(dn + 1), t) if cab.kept(o, keep)]
    else:
        found = cab.sales_since(since, t, keep, PAGE_ROWS)
    return [rows.sale_row(o, k, t) for o, k in found]


def _feed(req: Request, rows_of: Callable[[Request, int, int], list[dict[str, Any]]]) -> Response:
    raw = req.query.get("dateFrom")
    if raw is None or raw == "":
        return Response(400, {"errors": ["dateFrom: field required"]})
    since = parse_wb_datetime(raw)
    if since is None:
        return Response(400, {"errors": "dateFrom: Value not validated"})
    flag = req.query.get("flag", "0") or "0"
    if flag not in ("0", "1"):
        return Response(400, {"errors": "flag: Value not validated"})
    return Response(200, rows_of(req, since, int(flag)))


@endpoint("statistics", "GET", "/api/v1/supplier/orders", "statistics.orders")
def orders(req: Request) -> Response:
    return _feed(req, _orders)


@endpoint("statistics", "GET", "/api/v1/supplier/sales", "statistics.sales")
def sales(req: Request) -> Response:
    return _feed(req, _sales)
