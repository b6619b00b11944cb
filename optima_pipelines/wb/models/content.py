"""WB's content API (content-api): product cards (``WbClient.iter_cards``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import msgspec

from optima_pipelines.wb.screening import Page


class CardSize(msgspec.Struct, kw_only=True, gc=False):
    chrt_id: int | None = msgspec.field(default=None, name="chrtID")
    tech_size: str | None = msgspec.field(default=None, name="techSize")
    wb_size: str | None = msgspec.field(default=None, name="wbSize")
    skus: list[str] = msgspec.field(default_factory=list)


class Card(msgspec.Struct, kw_only=True, gc=False):
    """A product card (``POST /content/v2/get/cards/list``), stored in ``products`` (``sync.catalog``)."""

    KEYS: ClassVar[dict[str, str]] = {"nm_id": "the product's key (products' primary key)"}
    REFUSABLE: ClassVar[bool] = True
    WHEN: ClassVar[tuple[str, ...]] = ("updated_at",)
    ROW_KEY: ClassVar[tuple[str, ...]] = ("nm_id",)

    nm_id: int = msgspec.field(name="nmID")
    imt_id: int | None = msgspec.field(default=None, name="imtID")
    nm_uuid: str | None = msgspec.field(default=None, name="nmUUID")
    subject_id: int | None = msgspec.field(default=None, name="subjectID")
    subject_name: str | None = msgspec.field(default=None, name="subjectName")
    vendor_code: str | None = msgspec.field(default=None, name="vendorCode")
    brand: str | None = None
    title: str | None = None
    sizes: list[CardSize] = msgspec.field(default_factory=list)  # absent: no sizes, stored as []
    created_at: datetime | None = msgspec.field(default=None, name="createdAt")
    updated_at: datetime | None = msgspec.field(default=None, name="updatedAt")


class CardsCursor(msgspec.Struct, frozen=True):
    """Where a cards listing stands: WB's ``updatedAt`` string (passed back verbatim) and ``nmID``."""

    updated_at: str
    nm_id: int


class _CardsResponseCursor(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {
        "total": "how the listing ends (below the limit: the last page); guessing would stop early, and the "
        "cards sync deletes the products it did not see"
    }

    total: int
    updated_at: str | None = msgspec.field(default=None, name="updatedAt")
    nm_id: int | None = msgspec.field(default=None, name="nmID")


class _CardsResponse(msgspec.Struct, gc=False):
    KEYS: ClassVar[dict[str, str]] = {
        "cards": "the listing itself: taken as empty, the cards sync would delete every product",
        "cursor": "where the listing goes on, and whether it ends (see total)",
    }

    cards: list[Card]
    cursor: _CardsResponseCursor


class CardsPage(Page[Card]):
    """One page of cards (with its ``screening``); ``cursor`` resumes the listing after it."""

    cursor: CardsCursor | None = None
