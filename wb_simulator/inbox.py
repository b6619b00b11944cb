"""Feedbacks and questions of one cabinet, and the seller's answers to them.

Feedbacks come from bought-out orders (the order's drawn ``feedback_at``) or from
``sim.add_feedback``; questions arrive a few a day. Both appear when their time comes. Feedbacks
and questions older than three days when the simulator starts were mostly answered already.
"""

from __future__ import annotations

import hashlib
from typing import Any

from wb_simulator import catalogs
from wb_simulator.timefmt import DAY, utc_z
from wb_simulator.world import Cabinet, Order, Product, seed_of

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def short_id(*parts: object) -> str:
    """A 20-character id like WB's ``J2FMRjUj6hwvwCElqssz``, stable for the same parts."""
    n = int.from_bytes(hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()[:16], "big")
    out = []
    for _ in range(20):
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(out)


def _product_details(p: Product, cab: Cabinet) -> dict[str, Any]:
    return {
        "nmId": p.nm_id,
        "imtId": p.imt_id,
        "productName": p.title,
        "supplierArticle": p.vendor_code,
        "supplierName": cab.name,
        "brandName": p.brand,
    }


class Feedback:
    __slots__ = (
        "answer",
        "answered_at",
        "created",
        "edited",
        "id",
        "order",
        "product",
        "size",
        "text",
        "user",
        "valuation",
        "viewed",
    )

    def __init__(self, fid: str, created: int, product: Product, text: str, valuation: int, order: Order | None):
        self.id = fid
        self.created = created
        self.product = product
        self.order = order
        self.size = order.size.tech_size if order else product.sizes[0].tech_size
        self.text = text
        self.valuation = valuation
        self.answer: str | None = None
        self.answered_at: int | None = None
        self.edited = False
        self.viewed = False
        self.user = catalogs.USER_NAMES[seed_of(fid) % len(catalogs.USER_NAMES)]

    def render(self, cab: Cabinet) -> dict[str, Any]:
        p = self.product
        return {
            "id": self.id,
            "text": self.text,
            "pros": "",
            "cons": "",
            "productValuation": self.valuation,
            "createdDate": utc_z(self.created),
            "answer": None
            if self.answer is None
            else {"text": self.answer, "state": "wbRu", "editable": not self.edited},
            "state": "none" if self.answer is None else "wbRu",
            "productDetails": {**_product_details(p, cab), "size": self.size},
            "photoLinks": None,
            "video": None,
            "wasViewed": self.viewed,
            "userName": self.user,
            "orderStatus": "buyout",
            "matchingSize": "ok",
            "isAbleSupplierFeedbackValuation": True,
            "supplierFeedbackValuation": 0,
            "isAbleSupplierProductValuation": True,
            "supplierProductValuation": 0,
            "isAbleReturnProductOrders": False,
            "returnProductOrdersDate": None,
            "bables": None,
            "lastOrderShkId": int(self.order.sticker) if self.order else 0,
            "lastOrderCreatedAt": utc_z(self.order.date) if self.order else utc_z(self.created),
            "color": "чёрный",
            "subjectId": p.subject_id,
            "subjectName": p.subject_name,
            "parentFeedbackId": None,
            "childFeedbackId": None,
        }


class Question:
    __slots__ = ("answer", "answered_at", "created", "edited", "id", "product", "state", "text", "viewed")

    def __init__(self, qid: str, created: int, product: Product, text: str):
        self.id = qid
        self.created = created
        self.product = product
        self.text = text
        self.answer: str | None = None
        self.answered_at: int | None = None
        self.edited = False
        self.viewed = False
        self.state = "suppliersPortalSynch"

    def render(self, cab: Cabinet) -> dict[str, Any]:
        p = self.product
        return {
            "id": self.id,
            "text": self.text,
            "createdDate": utc_z(self.created),
            "state": self.state,
            "answer": None
            if self.answer is None
            else {
                "text": self.answer,
                "editable": not self.edited,
                "createDate": utc_z(self.answered_at or self.created),
            },
            "productDetails": _product_details(p, cab),
            "wasViewed": self.viewed,
            "isWarned": False,
        }


class Inbox:
    def __init__(self, cab: Cabinet, started_at: int):
        self.cab = cab
        self.started_at = started_at
        self.feedbacks: list[Feedback] = []
        self.feedback_by_id: dict[str, Feedback] = {}
        self.questions: list[Question] = []
        self.question_by_id: dict[str, Question] = {}
        self._fb_ptr = 0
        self._q_ptr = 0
        self._manual = 0

    def ensure(self, t: int) -> None:
        cab = self.cab
        events = cab.feedback_events
        while self._fb_ptr < len(events) and events[self._fb_ptr][0] <= t:
            ts, idx = events[self._fb_ptr]
            self._fb_ptr += 1
            o = cab.orders[idx]
            if o.feedback_at != ts:
                continue
            h = seed_of(cab.seed, "fb", cab.id, idx)
            fb = Feedback(
                short_id(cab.seed, "fb", cab.id, idx),
                ts,
                o.product,
                catalogs.FEEDBACK_TEXTS[h % len(catalogs.FEEDBACK_TEXTS)],
                (5, 5, 5, 4, 4, 3, 2, 1)[h % 8],
                o,
            )
            self._settle_old(fb, h)
            self._add_feedback(fb)
        qevents = cab.question_events
        while self._q_ptr < len(qevents) and qevents[self._q_ptr][0] <= t:
            ts, seq, pi = qevents[self._q_ptr]
            self._q_ptr += 1
            h = seed_of(cab.seed, "q", cab.id, seq)
            q = Question(
                short_id(cab.seed, "q", cab.id, seq),
                ts,
                cab.products[pi],
                catalogs.QUESTION_TEXTS[h % len(catalogs.QUESTION_TEXTS)],
            )
            self._settle_old(q, h)
            self.questions.append(q)
            self.question_by_id[q.id] = q

    def _settle_old(self, item: Feedback | Question, h: int) -> None:
        if item.created < self.started_at - 3 * DAY and h % 10 < 7:
            item.answer = "Спасибо за ваш отзыв!" if isinstance(item, Feedback) else "Здравствуйте! Да."
            item.answered_at = item.created + DAY
            item.viewed = True
            if isinstance(item, Question):
                item.state = "wbRu"

    def _add_feedback(self, fb: Feedback) -> None:
        self.feedbacks.append(fb)
        self.feedback_by_id[fb.id] = fb

    def add_feedback(self, product: Product, t: int, text: str, valuation: int) -> Feedback:
        self.ensure(t)
        self._manual += 1
        fb = Feedback(
            short_id(self.cab.seed, "manual-fb", self.cab.id, self._manual), t, product, text, valuation, None
        )
        self._add_feedback(fb)
        return fb

    def add_question(self, product: Product, t: int, text: str) -> Question:
        self.ensure(t)
        self._manual += 1
        q = Question(short_id(self.cab.seed, "manual-q", self.cab.id, self._manual), t, product, text)
        self.questions.append(q)
        self.question_by_id[q.id] = q
        return q
