"""WB's advertising API (advert-api): campaigns, their statistics, bids (``WbClient.list_campaigns``,
``fullstats``, ``set_bids``, ``min_bids``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import ClassVar

import msgspec

from optima_pipelines.wb.models.base import Row, table, to_moscow


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
    """A campaign of ``GET /api/advert/v2/adverts`` (stored in ``ad_campaigns`` and its products in
    ``ad_campaign_products``: ``sync.ads``)."""

    REFUSABLE: ClassVar[bool] = True
    ROW_KEY: ClassVar[tuple[str, ...]] = ("id",)

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


class _AdvertsResponse(msgspec.Struct, gc=False):
    adverts: list[Campaign]


class _StatsNm(msgspec.Struct, rename="camel", gc=False):
    REFUSABLE: ClassVar[bool] = True
    ROW_KEY: ClassVar[tuple[str, ...]] = ("nm_id",)

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
    REFUSABLE: ClassVar[bool] = True
    WHEN: ClassVar[tuple[str, ...]] = ("date",)

    date: datetime
    apps: list[_StatsApp]


class _StatsCampaign(msgspec.Struct, rename="camel", gc=False):
    advert_id: int
    days: list[_StatsDay] | None


@table
class AdStat(Row, kw_only=True):
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
            day = to_moscow(d.date).date()
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
