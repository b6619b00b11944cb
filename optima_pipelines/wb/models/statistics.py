"""WB's statistics API (statistics-api): orders, sales and returns (``WbClient.iter_orders``, ``iter_sales``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar

import msgspec

from optima_pipelines.wb.models.base import Row, table, to_moscow, to_moscow_or_none

_Date = date  # for annotations inside models that have a field named "date"

_STATISTICS_KEYS = {
    "date": "the Moscow day the row is counted on (wb_orders/wb_sales.day, the РНП's day)",
    "last_change_date": "the feed's paging cursor: the next page starts at the last row's lastChangeDate",
    "nm_id": "the product the row is counted under (the РНП is keyed by nm_id)",
}


@table
class Order(Row, rename="camel", kw_only=True):
    """One order (= one unit of goods) from ``GET /api/v1/supplier/orders``; table ``wb_orders``.

    Without ``priceWithDisc`` an order counts in the РНП's ``orders_count`` and adds nothing to
    ``orders_sum``; without ``spp`` it is left out of ``avg_spp_percent``. An empty ``srid`` is
    handled like a sale's empty ``saleID`` (see ``Sale``)."""

    DERIVED = ("day",)
    KEYS: ClassVar[dict[str, str]] = {"srid": "the order's key (wb_orders' primary key)", **_STATISTICS_KEYS}
    WHEN = ("date", "last_change_date", "cancel_date")
    ROW_KEY = ("srid", "nm_id")

    srid: str
    date: datetime
    last_change_date: datetime
    g_number: str | None = None
    warehouse_name: str | None = None
    warehouse_type: str | None = None
    country_name: str | None = None
    oblast_okrug_name: str | None = None
    region_name: str | None = None
    supplier_article: str | None = None
    nm_id: int
    barcode: str | None = None
    category: str | None = None
    subject: str | None = None
    brand: str | None = None
    tech_size: str | None = None
    income_id: int | None = msgspec.field(default=None, name="incomeID")
    is_supply: bool | None = None
    is_realization: bool | None = None
    total_price: Decimal | None = None
    discount_percent: int | None = None
    spp: Decimal | None = None
    finished_price: Decimal | None = None
    price_with_disc: Decimal | None = None
    is_cancel: bool = False  # absent: not cancelled
    cancel_date: datetime | None = None
    sticker: str | None = None

    def __post_init__(self) -> None:
        self.date = to_moscow(self.date)
        self.last_change_date = to_moscow(self.last_change_date)
        self.cancel_date = to_moscow_or_none(self.cancel_date)

    @property
    def day(self) -> _Date:
        """The Moscow day of the order."""
        return self.date.date()

    def derived(self) -> tuple[Any, ...]:
        return (self.date.date(),)


@table
class Sale(Row, rename="camel", kw_only=True):
    """A sale (``saleID`` S…) or a return (R…) from ``GET /api/v1/supplier/sales``; table ``wb_sales``.

    WB's spec allows an empty ``saleID``. Such a row is neither a sale nor a return we can tell, and
    has no key to find it again when WB sends it complete: the sync does not store it, counts it
    (``rows_skipped``) and logs its srid; the rest of the page loads (``sync.digitization``). Without
    ``priceWithDisc`` a sale counts in ``buyouts_count`` (a return in ``returns_count``) and adds
    nothing to the sum."""

    DERIVED = ("day", "is_return")
    KEYS: ClassVar[dict[str, str]] = {
        "sale_id": "the row's key (wb_sales' primary key) and what tells a sale from a return",
        **_STATISTICS_KEYS,
    }
    WHEN = ("date", "last_change_date")
    ROW_KEY = ("sale_id", "srid", "nm_id")

    sale_id: str = msgspec.field(name="saleID")
    srid: str | None = None
    date: datetime
    last_change_date: datetime
    g_number: str | None = None
    warehouse_name: str | None = None
    warehouse_type: str | None = None
    country_name: str | None = None
    oblast_okrug_name: str | None = None
    region_name: str | None = None
    supplier_article: str | None = None
    nm_id: int
    barcode: str | None = None
    category: str | None = None
    subject: str | None = None
    brand: str | None = None
    tech_size: str | None = None
    income_id: int | None = msgspec.field(default=None, name="incomeID")
    is_supply: bool | None = None
    is_realization: bool | None = None
    total_price: Decimal | None = None
    discount_percent: int | None = None
    spp: Decimal | None = None
    payment_sale_amount: Decimal | None = None
    for_pay: Decimal | None = None
    finished_price: Decimal | None = None
    price_with_disc: Decimal | None = None
    sticker: str | None = None

    def __post_init__(self) -> None:
        self.date = to_moscow(self.date)
        self.last_change_date = to_moscow(self.last_change_date)

    @property
    def day(self) -> _Date:
        return self.date.date()

    @property
    def is_return(self) -> bool:
        return self.sale_id.startswith("R")

    def derived(self) -> tuple[Any, ...]:
        return (self.date.date(), self.sale_id.startswith("R"))
