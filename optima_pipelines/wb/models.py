"""Typed WB rows, decoded and validated in one pass from JSON bytes (msgspec).

Conventions for every model:
- attributes are snake_case, decoded from WB's camelCase keys (explicit names where WB's casing is
  irregular: ``incomeID``, ``saleID``, ``nmID``, ``sum_price``);
- a field is required only where WB's OpenAPI requires it, or where it is one of the model's
  ``KEYS``: the few fields a sync cannot do without (a row's key, the day it is counted on, a
  paging cursor, the listing itself), each with its reason. A missing key fails the page with
  ``WbResponseError`` naming the endpoint and the field's JSON path. Every other field WB's spec
  marks optional is optional here: absent, it is None (NULL in the warehouse) unless the field's
  comment states another default (tests/unit/test_wb_spec_models.py holds every model to WB's files);
- money is ``Decimal`` exactly as WB wrote it: JSON numbers (statistics) and the finance API's
  strings alike, never through float;
- naive WB timestamps are Moscow wall time and become aware ``Europe/Moscow`` datetimes; aware ones
  are converted to Moscow; WB's ``0001-01-01T00:00:00`` "no date" becomes None;
- models that feed a warehouse table have ``COLUMNS`` (that table's column names, in order) and
  ``copy_row()`` (the values in that order), ready for ``COPY``. The loader adds ``cabinet_id``
  and its own bookkeeping columns (``loaded_at``, ``run_id``, ...).
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar, TypeVar

import msgspec

from optima_pipelines.timeutil import MOSCOW

_Date = date  # for annotations inside models that have a field named "date"


def _msk(dt: datetime) -> datetime:
    return dt.replace(tzinfo=MOSCOW) if dt.tzinfo is None else dt.astimezone(MOSCOW)


def _msk_or_none(dt: datetime | None) -> datetime | None:
    if dt is None or dt.year == 1:
        return None
    return _msk(dt)


_STATISTICS_KEYS = {
    "date": "the Moscow day the row is counted on (wb_orders/wb_sales.day, the РНП's day)",
    "last_change_date": "the feed's paging cursor: the next page starts at the last row's lastChangeDate",
    "nm_id": "the product the row is counted under (the РНП is keyed by nm_id)",
}


class _Row(msgspec.Struct, kw_only=True, gc=False):
    """A WB row that maps onto a warehouse table: COLUMNS are the struct's fields (their names are
    the table's columns) followed by ``DERIVED`` columns computed by ``derived()``."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    DERIVED: ClassVar[tuple[str, ...]] = ()

    def derived(self) -> tuple[Any, ...]:
        return ()

    def copy_row(self) -> tuple[Any, ...]:
        """Values in ``COLUMNS`` order."""
        return (*msgspec.structs.astuple(self), *self.derived())


R = TypeVar("R", bound=type[_Row])


def _table(cls: R) -> R:
    """Sets ``COLUMNS`` once msgspec has built the struct's fields."""
    cls.COLUMNS = (*cls.__struct_fields__, *cls.DERIVED)
    return cls


# --- statistics-api: orders, sales and returns -------------------------------------------------


@_table
class Order(_Row, rename="camel", kw_only=True):
    """One order (= one unit of goods) from ``GET /api/v1/supplier/orders``; table ``wb_orders``.

    Without ``priceWithDisc`` an order counts in the РНП's ``orders_count`` and adds nothing to
    ``orders_sum``; without ``spp`` it is left out of ``avg_spp_percent``. An empty ``srid`` is
    handled like a sale's empty ``saleID`` (see ``Sale``)."""

    DERIVED = ("day",)
    KEYS: ClassVar[dict[str, str]] = {"srid": "the order's key (wb_orders' primary key)", **_STATISTICS_KEYS}

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
        self.date = _msk(self.date)
        self.last_change_date = _msk(self.last_change_date)
        self.cancel_date = _msk_or_none(self.cancel_date)

    @property
    def day(self) -> _Date:
        """The Moscow day of the order."""
        return self.date.date()

    def derived(self) -> tuple[Any, ...]:
        return (self.date.date(),)


@_table
class Sale(_Row, rename="camel", kw_only=True):
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
        self.date = _msk(self.date)
        self.last_change_date = _msk(self.last_change_date)

    @property
    def day(self) -> _Date:
        return self.date.date()

    @property
    def is_return(self) -> bool:
        return self.sale_id.startswith("R")

    def derived(self) -> tuple[Any, ...]:
        return (self.date.date(), self.sale_id.startswith("R"))


# --- finance-api: the realization report -------------------------------------------------------


@_table
class ReportLine(_Row, rename="camel", kw_only=True):
    """One line of the realization report (``POST /api/finance/v1/sales-reports/detailed``); table
    ``wb_report_lines``. WB sends money as strings here; they become Decimal unchanged."""

    DERIVED = ("day",)

    rrd_id: int
    report_id: int
    date_from: date
    date_to: date
    create_date: date
    currency: str
    report_type: int
    gi_id: int
    subject_name: str
    nm_id: int
    brand_name: str
    vendor_code: str
    title: str
    tech_size: str
    sku: str
    doc_type_name: str
    seller_oper_name: str
    quantity: int
    retail_price: Decimal
    retail_amount: Decimal
    sale_percent: Decimal
    commission_percent: Decimal
    office_name: str
    order_dt: datetime | None
    sale_dt: datetime | None
    rr_date: date
    shk_id: int
    retail_price_with_disc: Decimal
    delivery_amount: int
    return_amount: int
    delivery_service: Decimal
    gi_box_type_name: str
    product_discount_for_report: Decimal
    seller_promo: Decimal
    spp: Decimal
    kvw_base: Decimal
    kvw: Decimal
    sup_rating_up: Decimal
    is_kgvp_v2: Decimal
    ppvz_sales_commission: Decimal
    for_pay: Decimal
    ppvz_reward: Decimal
    acquiring_fee: Decimal
    acquiring_percent: Decimal
    payment_processing: str
    acquiring_bank: str
    vw: Decimal
    vw_nds: Decimal
    ppvz_office_name: str
    ppvz_office_id: int
    ppvz_supplier_name: str
    ppvz_supplier_inn: str
    declaration_number: str
    bonus_type_name: str | None = None
    sticker_id: str
    country: str
    srv_dbs: bool
    penalty: Decimal
    additional_payment: Decimal
    rebill_logistic_cost: Decimal
    rebill_logistic_org: str | None = None
    paid_storage: Decimal
    deduction: Decimal
    paid_acceptance: Decimal
    order_id: int
    kiz: str | None = None
    is_b2b: bool = msgspec.field(name="isB2b")
    trbx_id: str
    installment_cofinancing_amount: Decimal
    wibes_discount_percent: Decimal
    cashback_amount: Decimal
    cashback_discount: Decimal
    cashback_commission_change: Decimal
    payment_schedule: Decimal
    delivery_method: str
    order_uid: str
    srid: str

    def __post_init__(self) -> None:
        self.order_dt = _msk_or_none(self.order_dt)
        self.sale_dt = _msk_or_none(self.sale_dt)

    @property
    def day(self) -> date:
        """The line's own Moscow date (``rrDate``)."""
        return self.rr_date

    def derived(self) -> tuple[Any, ...]:
        return (self.rr_date,)


# --- advert-api --------------------------------------------------------------------------------


class CampaignRef(msgspec.Struct, kw_only=True, gc=False):
    """One campaign of ``GET /adv/v1/promotion/count`` (None: WB did not say)."""

    advert_id: int
    type: int | None
    status: int | None
    change_time: datetime | None


class _AdvertListEntry(msgspec.Struct, rename="camel", gc=False):
    KEYS: ClassVar[dict[str, str]] = {"advert_id": "the campaign's id: what the entry is about"}

    advert_id: int
    change_time: datetime | None = None


class _AdvertGroup(msgspec.Struct, gc=False):
    type: int | None = None
    status: int | None = None
    advert_list: list[_AdvertListEntry] | None = None


class PromotionCount(msgspec.Struct, gc=False):
    adverts: list[_AdvertGroup] | None = None
    all: int = 0


class CampaignBids(msgspec.Struct, gc=False):
    search: int
    recommendations: int


class CampaignSubject(msgspec.Struct, gc=False):
    id: int
    name: str


class CampaignProduct(msgspec.Struct, kw_only=True, gc=False):
    """A product of a campaign with its bids in kopecks."""

    nm_id: int
    subject: CampaignSubject
    bids_kopecks: CampaignBids


class CampaignPlacements(msgspec.Struct, gc=False):
    search: bool
    recommendations: bool


class CampaignSettings(msgspec.Struct, gc=False):
    payment_type: str
    name: str
    placements: CampaignPlacements


class CampaignTimestamps(msgspec.Struct, gc=False):
    created: datetime
    updated: datetime
    started: datetime | None
    deleted: datetime


class Campaign(msgspec.Struct, kw_only=True, gc=False):
    """A campaign of ``GET /api/advert/v2/adverts``: table ``ad_campaigns`` (and its products,
    ``ad_campaign_products``)."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "advert_id",
        "name",
        "status",
        "bid_type",
        "payment_type",
        "currency",
        "created_at",
        "updated_at",
        "started_at",
    )
    PRODUCT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "advert_id",
        "nm_id",
        "subject_id",
        "subject_name",
        "bid_search_kopecks",
        "bid_recommendations_kopecks",
    )

    id: int
    bid_type: str
    currency: str | None = None
    status: int
    settings: CampaignSettings
    nm_settings: list[CampaignProduct] | None
    timestamps: CampaignTimestamps

    @property
    def advert_id(self) -> int:
        return self.id

    @property
    def products(self) -> list[CampaignProduct]:
        return self.nm_settings or []

    def copy_row(self) -> tuple[Any, ...]:
        t = self.timestamps
        return (
            self.id,
            self.settings.name,
            self.status,
            self.bid_type,
            self.settings.payment_type,
            self.currency,
            t.created,
            t.updated,
            t.started,
        )

    def product_rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                self.id,
                p.nm_id,
                p.subject.id,
                p.subject.name,
                p.bids_kopecks.search,
                p.bids_kopecks.recommendations,
            )
            for p in self.products
        ]


class _AdvertsResponse(msgspec.Struct, gc=False):
    adverts: list[Campaign]


class _StatsNm(msgspec.Struct, rename="camel", gc=False):
    nm_id: int
    name: str
    views: int
    clicks: int
    atbs: int
    orders: int
    shks: int
    canceled: int
    sum: Decimal
    sum_price: Decimal = msgspec.field(name="sum_price")


class _StatsApp(msgspec.Struct, rename="camel", gc=False):
    app_type: int
    nms: list[_StatsNm]


class _StatsDay(msgspec.Struct, gc=False):
    date: datetime
    apps: list[_StatsApp]


class _StatsCampaign(msgspec.Struct, rename="camel", gc=False):
    advert_id: int
    days: list[_StatsDay] | None


@_table
class AdStat(_Row, kw_only=True):
    """Ad statistics of one campaign, Moscow day, app (1 site, 32 Android, 64 iOS) and product, from
    ``GET /adv/v3/fullstats``; table ``ad_campaign_stats`` (``is_associated`` is the loader's: it
    knows the campaign's products). Money (``sum``: spend, ``sum_price``: ordered value) in rubles."""

    advert_id: int
    day: date
    app_type: int
    nm_id: int
    views: int
    clicks: int
    atbs: int
    orders: int
    shks: int
    canceled: int
    sum: Decimal
    sum_price: Decimal


def ad_stats_from(campaigns: list[_StatsCampaign]) -> list[AdStat]:
    rows = []
    for c in campaigns:
        for d in c.days or ():
            day = _msk(d.date).date()
            for app in d.apps:
                for nm in app.nms:
                    rows.append(
                        AdStat(
                            advert_id=c.advert_id,
                            day=day,
                            app_type=app.app_type,
                            nm_id=nm.nm_id,
                            views=nm.views,
                            clicks=nm.clicks,
                            atbs=nm.atbs,
                            orders=nm.orders,
                            shks=nm.shks,
                            canceled=nm.canceled,
                            sum=nm.sum,
                            sum_price=nm.sum_price,
                        )
                    )
    return rows


class BidUpdate(msgspec.Struct, kw_only=True, frozen=True):
    """A bid to set: ``placement`` is ``combined`` for unified-bid campaigns, ``search`` or
    ``recommendations`` for manual ones."""

    advert_id: int
    nm_id: int
    bid_kopecks: int
    placement: str


class _NmBid(msgspec.Struct, gc=False):
    nm_id: int
    bid_kopecks: int
    placement: str


class _AdvertBids(msgspec.Struct, gc=False):
    advert_id: int
    nm_bids: list[_NmBid]


class _BidsResponse(msgspec.Struct, gc=False):
    bids: list[_AdvertBids]
    currency: str


class MinBid(msgspec.Struct, gc=False):
    """The minimum bid of one placement type, in kopecks."""

    type: str
    value: int
    currency: str


class _NmMinBids(msgspec.Struct, gc=False):
    nm_id: int
    bids: list[MinBid]


class _MinBidsResponse(msgspec.Struct, gc=False):
    bids: list[_NmMinBids]


# --- seller-analytics-api ----------------------------------------------------------------------


class FunnelPeriod(msgspec.Struct, gc=False):
    start: date
    end: date


class FunnelConversions(msgspec.Struct, rename="camel", gc=False):
    add_to_cart_percent: Decimal
    cart_to_order_percent: Decimal
    buyout_percent: Decimal


class FunnelStatistic(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    period: FunnelPeriod
    open_count: int
    cart_count: int
    order_count: int
    order_sum: Decimal
    buyout_count: int
    buyout_sum: Decimal
    cancel_count: int
    cancel_sum: Decimal
    avg_price: Decimal
    avg_orders_count_per_day: Decimal
    share_order_percent: Decimal
    add_to_wishlist: int
    localization_percent: Decimal
    conversions: FunnelConversions


class FunnelStocks(msgspec.Struct, gc=False):
    wb: int
    mp: int
    balance_sum: Decimal = msgspec.field(name="balanceSum")


class FunnelProductInfo(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    nm_id: int
    title: str
    vendor_code: str
    brand_name: str
    subject_id: int
    subject_name: str
    stocks: FunnelStocks | None = None


class FunnelStatistics(msgspec.Struct, gc=False):
    selected: FunnelStatistic
    past: FunnelStatistic | None = None


class FunnelProduct(msgspec.Struct, gc=False):
    """A product's funnel over a period (``POST /api/analytics/v3/sales-funnel/products``)."""

    product: FunnelProductInfo
    statistic: FunnelStatistics


class _FunnelProductsData(msgspec.Struct, gc=False):
    products: list[FunnelProduct]


class _FunnelProductsResponse(msgspec.Struct, gc=False):
    data: _FunnelProductsData


class _FunnelHistoryDay(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    date: date
    open_count: int
    cart_count: int
    order_count: int
    order_sum: Decimal
    buyout_count: int
    buyout_sum: Decimal
    buyout_percent: Decimal
    add_to_cart_conversion: Decimal
    cart_to_order_conversion: Decimal
    add_to_wishlist_count: int


class _FunnelHistoryProduct(msgspec.Struct, rename="camel", gc=False):
    nm_id: int


class _FunnelHistoryItem(msgspec.Struct, gc=False):
    product: _FunnelHistoryProduct
    history: list[_FunnelHistoryDay]


@_table
class FunnelDay(_Row, kw_only=True):
    """A product's funnel for one day (``POST .../sales-funnel/products/history``); table
    ``rnp_funnel_stats``."""

    day: date
    nm_id: int
    open_count: int
    cart_count: int
    order_count: int
    order_sum: Decimal
    buyout_count: int
    buyout_sum: Decimal
    buyout_percent: Decimal
    add_to_cart_conversion: Decimal
    cart_to_order_conversion: Decimal
    add_to_wishlist_count: int


def funnel_days_from(items: list[_FunnelHistoryItem]) -> list[FunnelDay]:
    return [
        FunnelDay(
            day=h.date,
            nm_id=item.product.nm_id,
            open_count=h.open_count,
            cart_count=h.cart_count,
            order_count=h.order_count,
            order_sum=h.order_sum,
            buyout_count=h.buyout_count,
            buyout_sum=h.buyout_sum,
            buyout_percent=h.buyout_percent,
            add_to_cart_conversion=h.add_to_cart_conversion,
            cart_to_order_conversion=h.cart_to_order_conversion,
            add_to_wishlist_count=h.add_to_wishlist_count,
        )
        for item in items
        for h in item.history
    ]


@_table
class Stock(_Row, rename="camel", kw_only=True):
    """Stock of one size on one WB warehouse (``POST /api/analytics/v1/stocks-report/wb-warehouses``);
    table ``stocks`` (the loader adds the day and ``snapshot_at``)."""

    nm_id: int
    chrt_id: int
    warehouse_id: int
    warehouse_name: str
    region_name: str
    quantity: int
    in_way_to_client: int
    in_way_from_client: int


class _StocksData(msgspec.Struct, gc=False):
    items: list[Stock]


class _StocksResponse(msgspec.Struct, gc=False):
    data: _StocksData


# --- content-api -------------------------------------------------------------------------------


class CardSize(msgspec.Struct, kw_only=True, gc=False):
    chrt_id: int | None = msgspec.field(default=None, name="chrtID")
    tech_size: str | None = msgspec.field(default=None, name="techSize")
    wb_size: str | None = msgspec.field(default=None, name="wbSize")
    skus: list[str] = msgspec.field(default_factory=list)


class Card(msgspec.Struct, kw_only=True, gc=False):
    """A product card (``POST /content/v2/get/cards/list``); table ``products``."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "nm_id",
        "imt_id",
        "vendor_code",
        "brand",
        "subject_id",
        "subject_name",
        "title",
        "sizes",
        "wb_updated_at",
    )

    KEYS: ClassVar[dict[str, str]] = {"nm_id": "the product's key (products' primary key)"}

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

    def copy_row(self) -> tuple[Any, ...]:
        """``sizes`` as JSON text (``[{chrtID, techSize, skus}]``) for the jsonb column."""
        sizes = msgspec.json.encode(
            [{"chrtID": s.chrt_id, "techSize": s.tech_size, "skus": s.skus} for s in self.sizes]
        ).decode()
        return (
            self.nm_id,
            self.imt_id,
            self.vendor_code,
            self.brand,
            self.subject_id,
            self.subject_name,
            self.title,
            sizes,
            self.updated_at,
        )


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


class CardsPage(list[Card]):
    """One page of cards; ``cursor`` resumes the listing after it."""

    cursor: CardsCursor | None = None


# --- discounts-prices-api ----------------------------------------------------------------------


class PriceSize(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    size_id: int = msgspec.field(name="sizeID")
    price: Decimal
    discounted_price: Decimal
    club_discounted_price: Decimal
    tech_size_name: str


class Price(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """A product's current price (``GET /api/v2/list/goods/filter``); table ``prices``. ``price``
    is before the seller's discount, per size; ``copy_row`` takes the first size's (all sizes share
    it unless ``editable_size_price``) and keeps every size in ``sizes``.

    WB's spec allows ``sizes: []`` (or none): a product without a size has no price. The prices sync
    stores no row for it, so it ends up like a product WB no longer lists (its ``prices`` row, if it
    had one, is removed once the listing is complete; ``price_history`` keeps its past), and the
    repricer leaves it alone."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "nm_id",
        "vendor_code",
        "price",
        "discount",
        "club_discount",
        "currency",
        "sizes",
    )

    KEYS: ClassVar[dict[str, str]] = {"nm_id": "the product's key (prices' primary key)"}

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

    def copy_row(self) -> tuple[Any, ...]:
        sizes = msgspec.json.encode(
            [
                {
                    "sizeID": s.size_id,
                    "price": s.price,
                    "discountedPrice": s.discounted_price,
                    "clubDiscountedPrice": s.club_discounted_price,
                    "techSizeName": s.tech_size_name,
                }
                for s in self.sizes
            ]
        ).decode()
        return (self.nm_id, self.vendor_code, self.price, self.discount, self.club_discount, self.currency, sizes)


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


# --- feedbacks-api -----------------------------------------------------------------------------


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
        self.created_date = _msk_or_none(self.created_date)


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
        self.created_date = _msk_or_none(self.created_date)


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


# --- common-api --------------------------------------------------------------------------------


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
        self.date = _msk(self.date)

    @property
    def usable(self) -> bool:
        """A slot can be booked: acceptance open (coefficient 0 or 1) and unloading allowed."""
        return self.allow_unload and self.coefficient in (0, 1)


class NewsType(msgspec.Struct, gc=False):
    id: int | None = None
    name: str | None = None


class News(msgspec.Struct, kw_only=True, gc=False):
    """A WB news item (``GET /api/communications/v2/news``); table ``kb_articles``."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("news_id", "header", "content", "published_at", "types")
    KEYS: ClassVar[dict[str, str]] = {"id": "the article's key (kb_articles' primary key) and the next page's fromID"}

    id: int
    header: str = ""  # absent: empty, like content
    content: str = ""
    date: datetime | None = None  # absent: published_at NULL
    types: list[NewsType] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        self.date = _msk_or_none(self.date)

    def copy_row(self) -> tuple[Any, ...]:
        return (self.id, self.header, self.content, self.date, msgspec.json.encode(self.types).decode())


class _NewsResponse(msgspec.Struct, gc=False):
    data: list[News] = msgspec.field(default_factory=list)  # absent: no news


class Ping(msgspec.Struct):
    """``GET /ping``: WB reached, the token valid for that category."""

    TS: datetime | None = None
    Status: str | None = None
