"""WB's feedbacks and questions API (feedbacks-api): feedbacks, questions and their answers
(``WbClient.iter_feedbacks``, ``iter_questions``, ``answer_feedback``, ``answer_question``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import msgspec

from optima_pipelines.wb.models.base import to_moscow_or_none


class ProductDetails(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """The product a question is about (autoreply stores ``nm_id`` NULL when WB leaves it out: rules
    limited to products then do not match it)."""

    nm_id: int | None = None
    imt_id: int | None = None
    product_name: str | None = None
    supplier_article: str | None = None
    supplier_name: str | None = None
    brand_name: str | None = None


class FeedbackProductDetails(ProductDetails, kw_only=True, gc=False):
    """The product a feedback is about: a question's details and the size bought."""

    size: str | None = None


class FeedbackAnswer(msgspec.Struct, kw_only=True, gc=False):
    text: str = ""  # absent: an empty answer
    state: str | None = None
    editable: bool | None = None


class Feedback(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """A buyer's feedback (``GET /api/v1/feedbacks``). Without ``productValuation`` it has no rating:
    autoreply rules limited to ratings do not match it."""

    KEYS: ClassVar[dict[str, str]] = {"id": "the feedback's key: what an answer is sent to"}

    id: str
    text: str = ""  # absent: empty, like pros and cons
    pros: str = ""
    cons: str = ""
    product_valuation: int | None = None
    created_date: datetime | None = None
    state: str | None = None
    answer: FeedbackAnswer | None = None
    product_details: FeedbackProductDetails = msgspec.field(default_factory=FeedbackProductDetails)
    was_viewed: bool | None = None
    user_name: str | None = None
    order_status: str | None = None
    subject_id: int | None = None
    subject_name: str | None = None

    def __post_init__(self) -> None:
        self.created_date = to_moscow_or_none(self.created_date)


_LISTING = "the listing: taken as empty, autoreply would mark every open item answered elsewhere"
_ITEM = "the item: without it a resent answer cannot be checked against WB"


class _FeedbacksData(msgspec.Struct, rename="camel", gc=False):
    KEYS: ClassVar[dict[str, str]] = {"feedbacks": _LISTING}

    feedbacks: list[Feedback]
    count_unanswered: int | None = None
    count_archive: int | None = None


class _FeedbacksResponse(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {"data": _LISTING}

    data: _FeedbacksData | None
    error: bool = False
    errorText: str = ""


class _FeedbackResponse(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {"data": _ITEM}

    data: Feedback | None
    error: bool = False
    errorText: str = ""


class QuestionAnswer(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    text: str = ""  # absent: an empty answer
    editable: bool | None = None
    create_date: datetime | None = None


class Question(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """A buyer's question (``GET /api/v1/questions``)."""

    KEYS: ClassVar[dict[str, str]] = {"id": "the question's key: what an answer is sent to"}

    id: str
    text: str = ""  # absent: empty
    created_date: datetime | None = None
    state: str | None = None
    answer: QuestionAnswer | None = None
    product_details: ProductDetails = msgspec.field(default_factory=ProductDetails)
    was_viewed: bool | None = None
    is_warned: bool | None = None

    def __post_init__(self) -> None:
        self.created_date = to_moscow_or_none(self.created_date)


class _QuestionsData(msgspec.Struct, rename="camel", gc=False):
    KEYS: ClassVar[dict[str, str]] = {"questions": _LISTING}

    questions: list[Question]
    count_unanswered: int | None = None
    count_archive: int | None = None


class _QuestionsResponse(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {"data": _LISTING}

    data: _QuestionsData | None
    error: bool = False
    errorText: str = ""


class _QuestionResponse(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {"data": _ITEM}

    data: Question | None
    error: bool = False
    errorText: str = ""


class _EnvelopeResponse(msgspec.Struct, gc=False):
    error: bool = False
    errorText: str = ""
