"""WB's common API (common-api): acceptance slots, news, ping (``WbClient.acceptance_coefficients``,
``iter_news``, ``ping``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import ClassVar

import msgspec

from optima_pipelines.wb.models.base import to_moscow, to_moscow_or_none


class AcceptanceCoefficient(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """Acceptance on a warehouse for one day and box type (``GET /api/tariffs/v1/acceptance/coefficients``).
    ``coefficient`` -1: closed; 0: free; ≥1: price multiplier. Tariffs stay WB's strings. A slot WB
    sends without its coefficient or ``allowUnload`` is taken as closed: never booked."""

    KEYS: ClassVar[dict[str, str]] = {
        "date": "the slot's day: what a booking task's date range is matched against",
        "warehouse_id": "the slot's warehouse: what a booking task names",
    }

    date: datetime
    coefficient: Decimal = Decimal(-1)  # absent: closed
    warehouse_id: int = msgspec.field(name="warehouseID")
    warehouse_name: str = ""  # absent: no name shown
    allow_unload: bool = False  # absent: unloading not allowed
    box_type_id: int | None = msgspec.field(default=None, name="boxTypeID")
    storage_coef: str | None = None
    delivery_coef: str | None = None
    delivery_base_liter: str | None = None
    delivery_additional_liter: str | None = None
    storage_base_liter: str | None = None
    storage_additional_liter: str | None = None
    is_sorting_center: bool | None = None

    def __post_init__(self) -> None:
        self.date = to_moscow(self.date)

    @property
    def usable(self) -> bool:
        """A slot can be booked: acceptance open (coefficient 0 or 1) and unloading allowed."""
        return self.allow_unload and self.coefficient in (0, 1)


class NewsType(msgspec.Struct, gc=False):
    id: int | None = None
    name: str | None = None


class News(msgspec.Struct, kw_only=True, gc=False):
    """A WB news item (``GET /api/communications/v2/news``), stored in ``kb_articles`` (``sync.news``)."""

    KEYS: ClassVar[dict[str, str]] = {"id": "the article's key (kb_articles' primary key) and the next page's fromID"}
    REFUSABLE: ClassVar[bool] = True
    ROW_KEY: ClassVar[tuple[str, ...]] = ("id",)

    id: int
    header: str = ""  # absent: empty, like content
    content: str = ""
    date: datetime | None = None  # absent: published_at NULL
    types: list[NewsType] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        self.date = to_moscow_or_none(self.date)


class _NewsResponse(msgspec.Struct, gc=False):
    data: list[News] = msgspec.field(default_factory=list)  # absent: no news


class Ping(msgspec.Struct):
    """``GET /ping``: WB reached, the token valid for that category."""

    TS: datetime | None = None
    Status: str | None = None
