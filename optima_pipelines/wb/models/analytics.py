"""WB's seller analytics API (seller-analytics-api): the sales funnel and stocks (``WbClient.funnel_products``,
``iter_stocks``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import ClassVar

import msgspec

from optima_pipelines.wb.models.base import Row, table


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

    REFUSABLE: ClassVar[bool] = True

    product: FunnelProductInfo
    statistic: FunnelStatistics


class _FunnelProductsData(msgspec.Struct, gc=False):
    products: list[FunnelProduct]


class _FunnelProductsResponse(msgspec.Struct, gc=False):
    data: _FunnelProductsData


@table
class FunnelDay(Row, kw_only=True):
    """A product's funnel for one day, from a one-day period report (``sync.funnel.funnel_day``);
    table ``rnp_funnel_stats``."""

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


@table
class Stock(Row, rename="camel", kw_only=True):
    """Stock of one size on one WB warehouse (``POST /api/analytics/v1/stocks-report/wb-warehouses``);
    table ``stocks`` (the loader adds the day and ``snapshot_at``)."""

    ROW_KEY = ("nm_id", "chrt_id", "warehouse_id")

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
