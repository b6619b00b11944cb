"""feedbacks-api: feedbacks and questions, and the seller's answers (one shared bucket)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wb_simulator.api.base import BadJson, Request, Response, endpoint, envelope, int_param
from wb_simulator.inbox import Feedback, Inbox, Question
from wb_simulator.timefmt import day_number


def _bad(req: Request, text: str, status: int = 400) -> Response:
    body = envelope(None, error=True, text=text, feedbacks=True)
    body["requestId"] = req.request_id()
    return Response(status, body)


def _fbapi_bad(req: Request, detail: str) -> Response:
    return Response(400, {"title": "bad request", "requestId": req.request_id(), "origin": "fbapi", "detail": detail})


def _list_params(req: Request, max_take: int, max_skip: int, max_sum: int | None) -> dict[str, Any] | str:
    answered = req.query.get("isAnswered")
    if answered not in ("true", "false"):
        return "isAnswered: true or false required"
    try:
        take, skip = int_param(req.query, "take"), int_param(req.query, "skip")
        nm = int_param(req.query, "nmId")
        date_from, date_to = int_param(req.query, "dateFrom"), int_param(req.query, "dateTo")
    except ValueError as exc:
        return str(exc)
    if take is None or not 1 <= take <= max_take:
        return f"take: from 1 to {max_take} required"
    if skip is None or not 0 <= skip <= max_skip:
        return f"skip: from 0 to {max_skip} required"
    if max_sum is not None and take + skip > max_sum:
        return f"take + skip must not exceed {max_sum}"
    order = req.query.get("order", "dateDesc")
    if order not in ("dateAsc", "dateDesc"):
        return "order: dateAsc or dateDesc"
    return {
        "answered": answered == "true",
        "take": take,
        "skip": skip,
        "nm": nm,
        "from": date_from,
        "to": date_to,
        "desc": order == "dateDesc",
    }


def _select(items: Sequence[Feedback | Question], p: dict[str, Any]) -> list[Feedback | Question]:
    found = [
        i
        for i in items
        if (i.answer is not None) == p["answered"]
        and (p["nm"] is None or i.product.nm_id == p["nm"])
        and (p["from"] is None or i.created >= p["from"])
        and (p["to"] is None or i.created <= p["to"])
    ]
    found.sort(key=lambda i: (i.created, i.id), reverse=p["desc"])
    return found[p["skip"] : p["skip"] + p["take"]]


def _inbox(req: Request) -> Inbox:
    """The cabinet's inbox, with what arrived up to the request's moment."""
    inbox = req.sim.inboxes[req.cabinet.id]
    inbox.ensure(req.t)
    return inbox


def _listing(req: Request, kind: str, params: dict[str, Any] | str) -> Response:
    if isinstance(params, str):
        return _bad(req, params)
    inbox = _inbox(req)
    items: Sequence[Feedback | Question] = inbox.feedbacks if kind == "feedbacks" else inbox.questions
    unanswered = sum(1 for i in items if i.answer is None)
    data = {
        "countUnanswered": unanswered,
        "countArchive": len(items) - unanswered,
        kind: [i.render(req.cabinet) for i in _select(items, params)],
    }
    return Response(200, envelope(data, feedbacks=True))


@endpoint("feedbacks", "GET", "/api/v1/feedbacks", "feedbacks")
def feedbacks(req: Request) -> Response:
    return _listing(req, "feedbacks", _list_params(req, 5000, 199_990, None))


@endpoint("feedbacks", "GET", "/api/v1/questions", "feedbacks")
def questions(req: Request) -> Response:
    return _listing(req, "questions", _list_params(req, 10_000, 10_000, 10_000))


def _counts(req: Request, items: Sequence[Feedback | Question]) -> Response:
    today = day_number(req.t)
    open_items = [i for i in items if i.answer is None]
    data = {
        "countUnanswered": len(open_items),
        "countUnansweredToday": sum(1 for i in open_items if day_number(i.created) == today),
    }
    return Response(200, envelope(data, feedbacks=True))


@endpoint("feedbacks", "GET", "/api/v1/feedbacks/count-unanswered", "feedbacks")
def feedbacks_unanswered(req: Request) -> Response:
    return _counts(req, _inbox(req).feedbacks)


@endpoint("feedbacks", "GET", "/api/v1/questions/count-unanswered", "feedbacks")
def questions_unanswered(req: Request) -> Response:
    return _counts(req, _inbox(req).questions)


def _by_id(req: Request, items: Callable[[Inbox], Mapping[str, Feedback | Question]], unknown: str) -> Response:
    """One feedback or question by its ``id``; an unknown one is WB's documented 422 with ``unknown``."""
    item_id = req.query.get("id")
    if not item_id:
        return _bad(req, "id: field required")
    item = items(_inbox(req)).get(item_id)
    if item is None:
        return _bad(req, unknown, 422)
    return Response(200, envelope(item.render(req.cabinet), feedbacks=True))


# WB's answer for an id it does not know is not documented; the simulator answers 200 with null data.
@endpoint("feedbacks", "GET", "/api/v1/feedback", "feedbacks")
def feedback(req: Request) -> Response:
    # An unknown id: WB's documented answer (ResponseGetFeedbackByIdErrEx).
    return _by_id(req, lambda inbox: inbox.feedback_by_id, "Невозможно получить отзыв по id")


@endpoint("feedbacks", "GET", "/api/v1/question", "feedbacks")
def question(req: Request) -> Response:
    # An unknown id: WB's documented answer (ResponseGetQuestionByIdErrEx).
    return _by_id(req, lambda inbox: inbox.question_by_id, "Невозможно получить вопрос по id")


def _json_body(req: Request) -> dict[str, Any] | Response:
    content_type = req.headers.get("content-type", "").strip()
    if not content_type:
        return _fbapi_bad(req, "content-type header not specified")
    mime = content_type.split(";")[0].strip().lower()
    if "/" not in mime:
        return _fbapi_bad(req, f"content-type is not a valid mime-type: {mime}")
    if mime != "application/json":
        return _fbapi_bad(req, f"not a json content-type: {mime}")
    try:
        return req.json_object()
    except BadJson:
        return _fbapi_bad(req, "Неверный синтаксис JSON")


@endpoint("feedbacks", "POST", "/api/v1/feedbacks/answer", "feedbacks", write=True)
def answer_feedback(req: Request) -> Response:
    body = _json_body(req)
    if isinstance(body, Response):
        return body
    fid, text = body.get("id"), body.get("text")
    if not isinstance(fid, str) or not fid:
        return _fbapi_bad(req, "id: field required")
    if not isinstance(text, str) or not 2 <= len(text) <= 5000:
        return _fbapi_bad(req, "text: from 2 to 5000 characters required")
    inbox = _inbox(req)
    fb = inbox.feedback_by_id.get(fid)
    if fb is not None:  # WB does not check the id: an unknown one "succeeds" too
        fb.answer, fb.answered_at, fb.viewed = text, req.t, True
    req.sim.record("feedback_answer", req.cabinet.id, body, {"found": fb is not None})
    return Response(204)


@endpoint("feedbacks", "PATCH", "/api/v1/questions", "feedbacks", write=True)
def patch_question(req: Request) -> Response:
    try:
        body = req.json_object()
    except BadJson:
        return _bad(req, "Неверный синтаксис JSON")
    if not isinstance(body.get("id"), str):
        return _bad(req, "id: field required")
    inbox = _inbox(req)
    q = inbox.question_by_id.get(body["id"])
    if q is None:
        return _bad(req, "Не найден отзыв", 404)
    if "wasViewed" in body and "answer" not in body:
        if not isinstance(body["wasViewed"], bool):
            return _bad(req, "wasViewed: boolean required")
        q.viewed = body["wasViewed"]
        action = "viewed"
    else:
        answer, state = body.get("answer"), body.get("state")
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not text.strip() or state not in ("wbRu", "none"):
            return _bad(req, "answer.text and state (wbRu or none) required")
        if q.answer is not None:
            if q.edited or state != "wbRu":
                return _bad(req, "Не удалось отредактировать вопрос", 422)
            q.edited = True
        q.answer, q.answered_at, q.viewed = text, req.t, True
        q.state = "wbRu" if state == "wbRu" else "none"
        action = "answer" if state == "wbRu" else "reject"
    req.sim.record("question", req.cabinet.id, body, {"action": action})
    return Response(200, envelope(None, feedbacks=True))
