"""discounts-prices-api: goods with prices, upload tasks and their history (one shared bucket)."""

from __future__ import annotations

from wb_simulator import rows
from wb_simulator.api.base import BadJson, Request, Response, endpoint, envelope, int_param
from wb_simulator.pricing import PriceTask, UploadRefused

INVALID = "Invalid request parameters"


def _bad(text: str = INVALID, status: int = 400) -> Response:
    return Response(status, envelope(None, error=True, text=text))


def _paging(req: Request) -> tuple[int, int] | Response:
    try:
        limit = int_param(req.query, "limit")
        offset = int_param(req.query, "offset", 0)
    except ValueError:
        return _bad()
    if limit is None or not 1 <= limit <= 1000 or offset is None or offset < 0:
        return _bad()
    return limit, offset


@endpoint("prices", "GET", "/api/v2/list/goods/filter", "prices")
def goods_filter(req: Request) -> Response:
    paging = _paging(req)
    if isinstance(paging, Response):
        return paging
    limit, offset = paging
    try:
        only = int_param(req.query, "filterNmID")
    except ValueError:
        return _bad()
    products = [p for p in req.cabinet.products if only is None or p.nm_id == only]
    return Response(200, envelope({"listGoods": [rows.goods(p) for p in products[offset : offset + limit]]}))


@endpoint("prices", "POST", "/api/v2/upload/task", "prices", write=True)
def upload_task(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson:
        return _bad("Invalid data format")
    items = body.get("data")
    if not isinstance(items, list):
        return _bad("Invalid data format")
    book = req.sim.price_books[req.cabinet.id]
    try:
        task, existed = book.upload(items, req.t)
    except UploadRefused as exc:
        return _bad(exc.text)
    if existed:
        return Response(208, envelope({"id": task.upload_id, "alreadyExists": True}, text="This task already exists"))
    req.sim.record("price_task", req.cabinet.id, body, {"uploadID": task.upload_id, **task.summary()})
    return Response(200, envelope({"id": task.upload_id, "alreadyExists": False}))


def _task(req: Request) -> tuple[PriceTask | None, Response | None]:
    try:
        upload_id = int_param(req.query, "uploadID")
    except ValueError:
        return None, _bad()
    if upload_id is None:
        return None, _bad()
    return req.sim.price_books[req.cabinet.id].tasks.get(upload_id), None


@endpoint("prices", "GET", "/api/v2/history/tasks", "prices")
def history_task(req: Request) -> Response:
    task, error = _task(req)
    if error is not None:
        return error
    return Response(200, envelope(task.summary() if task else None))


@endpoint("prices", "GET", "/api/v2/history/goods/task", "prices")
def history_goods(req: Request) -> Response:
    paging = _paging(req)
    if isinstance(paging, Response):
        return paging
    task, error = _task(req)
    if error is not None:
        return error
    # WB's schema for this one answer has no error/errorText beside data.
    if task is None:
        return Response(200, {"data": {"uploadID": None, "historyGoods": None}})
    limit, offset = paging
    return Response(200, {"data": {"uploadID": task.upload_id, "historyGoods": task.goods[offset : offset + limit]}})


# Tasks are processed the moment they are accepted, so the buffer (tasks waiting for a promo
# calendar start) is always empty.
@endpoint("prices", "GET", "/api/v2/buffer/tasks", "prices")
def buffer_task(req: Request) -> Response:
    _, error = _task(req)
    return error or Response(200, envelope(None))


@endpoint("prices", "GET", "/api/v2/buffer/goods/task", "prices")
def buffer_goods(req: Request) -> Response:
    paging = _paging(req)
    if isinstance(paging, Response):
        return paging
    _, error = _task(req)
    return error or Response(200, envelope({"uploadID": None, "bufferGoods": None}))
