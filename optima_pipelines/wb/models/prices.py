"""WB's prices and discounts API (discounts-prices-api): prices, uploads and their tasks
(``WbClient.iter_prices``, ``upload_prices``, ``price_task``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import ClassVar

import msgspec


class PriceSize(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    size_id: int = msgspec.field(name="sizeID")
    price: Decimal
    discounted_price: Decimal
    club_discounted_price: Decimal
    tech_size_name: str


class Price(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """A product's current price (``GET /api/v2/list/goods/filter``), stored in ``prices``
    (``sync.catalog``). ``price`` is before the seller's discount, per size: the first size's (all
    sizes share it unless ``editable_size_price``); the table keeps every size in ``sizes``.

    WB's spec allows ``sizes: []`` (or none): a product without a size has no price. The prices sync
    stores no row for it, so it ends up like a product WB no longer lists (its ``prices`` row, if it
    had one, is removed once the listing is complete; ``price_history`` keeps its past), and the
    repricer leaves it alone."""

    KEYS: ClassVar[dict[str, str]] = {"nm_id": "the product's key (prices' primary key)"}
    REFUSABLE: ClassVar[bool] = True
    ROW_KEY: ClassVar[tuple[str, ...]] = ("nm_id",)

    nm_id: int = msgspec.field(name="nmID")
    vendor_code: str | None = None
    sizes: list[PriceSize] = msgspec.field(default_factory=list)
    currency: str | None = msgspec.field(default=None, name="currencyIsoCode4217")
    discount: int = 0  # absent: no seller's discount
    club_discount: int | None = None
    editable_size_price: bool = False
    is_bad_turnover: bool | None = None

    @property
    def priced(self) -> bool:
        """WB gave a price: the product has at least one size."""
        return bool(self.sizes)

    @property
    def price(self) -> Decimal:
        return self.sizes[0].price


class _GoodsData(msgspec.Struct, rename="camel", gc=False):
    list_goods: list[Price]


class _GoodsResponse(msgspec.Struct, gc=False):
    data: _GoodsData
    error: bool = False
    errorText: str = ""


class PriceUpdate(msgspec.Struct, kw_only=True, frozen=True):
    """A price and/or discount to set for a product (``price`` in whole currency units, before the
    discount; ``discount`` in %); None leaves that part as it is."""

    nm_id: int
    price: int | None = None
    discount: int | None = None


class _UploadData(msgspec.Struct, rename="camel", gc=False):
    KEYS: ClassVar[dict[str, str]] = {"id": "the task's id: the only way to follow the upload"}

    id: int
    already_exists: bool = False


class _UploadResponse(msgspec.Struct, gc=False):
    data: _UploadData | None = None  # absent: the client reports "no task id" naming $.data
    error: bool = False
    errorText: str = ""


class _TaskInfo(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    KEYS: ClassVar[dict[str, str]] = {"status": "the task's state: the one thing the call is asked for"}

    upload_id: int | None = msgspec.field(default=None, name="uploadID")
    status: int
    upload_date: datetime | None = None
    activation_date: datetime | None = None
    over_all_goods_number: int = 0
    success_goods_number: int = 0


class _TaskResponse(msgspec.Struct, gc=False):
    data: _TaskInfo | None = None
    error: bool = False
    errorText: str = ""


class PriceTaskItem(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """One product of a processed price task: ``status`` 2 applied, 3 refused (``error_text`` says
    why, e.g. price quarantine)."""

    KEYS: ClassVar[dict[str, str]] = {
        "nm_id": "the product the outcome is about",
        "status": "the outcome itself: applied (2) or refused (3)",
    }

    nm_id: int = msgspec.field(name="nmID")
    vendor_code: str | None = None
    size_id: int | None = msgspec.field(default=None, name="sizeID")
    tech_size_name: str | None = None
    price: Decimal | None = None
    currency: str | None = msgspec.field(default=None, name="currencyIsoCode4217")
    discount: int | None = None
    club_discount: int | None = None
    status: int
    error_text: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 2


class _HistoryGoodsData(msgspec.Struct, rename="camel", gc=False):
    upload_id: int | None = msgspec.field(default=None, name="uploadID")
    history_goods: list[PriceTaskItem] | None = None


class _HistoryGoodsResponse(msgspec.Struct, gc=False):
    data: _HistoryGoodsData | None = None


#: Price task statuses (``GET /api/v2/history/tasks``): 1 still processing (in WB's buffer).
PRICE_TASK_PROCESSING = 1
PRICE_TASK_DONE_STATUSES = {
    3: "processed, no errors",
    4: "cancelled",
    5: "processed, some items refused",
    6: "processed, every item refused",
}


class PriceTaskResult(msgspec.Struct, kw_only=True):
    """Where a price upload stands: ``done`` once WB processed it (status 3/4/5/6), with each item's
    own status; still processing (status 1) when the wait ran out."""

    upload_id: int
    status: int
    items: list[PriceTaskItem]

    @property
    def done(self) -> bool:
        return self.status in PRICE_TASK_DONE_STATUSES

    @property
    def failed_items(self) -> list[PriceTaskItem]:
        return [i for i in self.items if not i.ok]
