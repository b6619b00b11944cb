"""WB's JSON shapes of the simulator's objects: order and sale rows, cards, goods with prices.

Money in these feeds is a JSON number in rubles (kopecks / 100, which prints as WB prints it:
``1547``, ``1145.5``). Return rows (``saleID`` ``R…``) carry the sale's amounts negated.
"""

from __future__ import annotations

import time
from typing import Any

from wb_simulator import catalogs
from wb_simulator.timefmt import msk_naive
from wb_simulator.world import Order, Product, uuid_from

NO_DATE = "0001-01-01T00:00:00"


def rub(kopecks: int) -> int | float:
    """Kopecks as WB's JSON number: whole rubles as an integer, else rubles with kopecks."""
    return kopecks // 100 if kopecks % 100 == 0 else kopecks / 100


def _base(o: Order) -> dict[str, Any]:
    p = o.product
    wh = catalogs.STOCK_WAREHOUSES[o.warehouse]
    country, okrug, region = catalogs.REGIONS[o.region]
    return {
        "date": msk_naive(o.date),
        "lastChangeDate": "",
        "warehouseName": wh[1],
        "warehouseType": "Склад WB",
        "countryName": country,
        "oblastOkrugName": okrug,
        "regionName": region,
        "supplierArticle": p.vendor_code,
        "nmId": p.nm_id,
        "barcode": o.size.barcode,
        "category": p.category,
        "subject": p.subject_name,
        "brand": p.brand,
        "techSize": o.size.tech_size,
        "incomeID": o.income_id,
        "isSupply": False,
        "isRealization": True,
        "totalPrice": o.total_price,
        "discountPercent": o.discount,
        "spp": o.spp,
    }


def order_row(o: Order, t: int) -> dict[str, Any]:
    """The order as ``GET /api/v1/supplier/orders`` shows it at time ``t``."""
    row = _base(o)
    cancelled = o.cancel_at is not None and o.cancel_at <= t
    row["date"] = msk_naive(o.date_at(t))
    row["lastChangeDate"] = msk_naive(o.last_change(t))
    row["finishedPrice"] = rub(o.fin_k)
    row["priceWithDisc"] = rub(o.pwd_k)
    row["isCancel"] = cancelled
    row["cancelDate"] = msk_naive(o.cancel_at) if cancelled else NO_DATE  # type: ignore[arg-type]
    row["sticker"] = o.sticker
    row["gNumber"] = o.g_number
    row["srid"] = o.srid
    return row


def sale_row(o: Order, kind: int, t: int | None = None) -> dict[str, Any]:
    """The sale (kind 0, ``S…``) or return (kind 1, ``R…``) row of ``GET /api/v1/supplier/sales``, as
    seen at ``t`` (a re-dated sale: its new date and lastChangeDate; None: as it was made)."""
    row = _base(o)
    sign = -1 if kind else 1
    if kind:
        row["date"] = row["lastChangeDate"] = msk_naive(o.return_at)  # type: ignore[arg-type]
    else:
        at = o.sale_at if t is None else o.sale_date_at(t)
        changed = o.sale_at if t is None else o.sale_change_at(t)
        row["date"], row["lastChangeDate"] = msk_naive(at), msk_naive(changed)  # type: ignore[arg-type]
    row["paymentSaleAmount"] = 0
    row["forPay"] = rub(sign * o.for_pay_k)
    row["finishedPrice"] = rub(sign * o.fin_k)
    row["priceWithDisc"] = rub(sign * o.pwd_k)
    row["saleID"] = o.return_id if kind else o.sale_id
    row["sticker"] = o.sticker
    row["gNumber"] = o.g_number
    row["srid"] = o.srid
    return row


def card(p: Product) -> dict[str, Any]:
    """A product card as ``POST /content/v2/get/cards/list`` shows it."""
    photo = f"https://basket-01.wbbasket.ru/vol{p.nm_id // 100000}/part{p.nm_id // 1000}/{p.nm_id}/images"
    return {
        "nmID": p.nm_id,
        "imtID": p.imt_id,
        "nmUUID": uuid_from("card", p.nm_id),
        "subjectID": p.subject_id,
        "subjectName": p.subject_name,
        "vendorCode": p.vendor_code,
        "brand": p.brand,
        "title": p.title,
        "description": f"{p.title}. Артикул {p.vendor_code}.",
        "needKiz": False,
        "kizMarked": False,
        "photos": [
            {
                "big": f"{photo}/big/1.webp",
                "c246x328": f"{photo}/c246x328/1.webp",
                "c516x688": f"{photo}/c516x688/1.webp",
                "square": f"{photo}/square/1.webp",
                "tm": f"{photo}/tm/1.webp",
            }
        ],
        "wholesale": {"enabled": False, "quantum": 0},
        "dimensions": {"length": 30, "width": 20, "height": 10, "weightBrutto": 0.8, "isValid": True},
        "characteristics": [{"id": 14177449, "name": "Цвет", "value": ["чёрный"]}],
        "sizes": [
            {"chrtID": s.chrt_id, "techSize": s.tech_size, "wbSize": s.wb_size, "skus": [s.barcode]} for s in p.sizes
        ],
        "tags": [],
        "createdAt": _iso_ms(p.created_ts),
        "updatedAt": _iso_ms(p.updated_ts),
    }


def goods(p: Product) -> dict[str, Any]:
    """A product's prices as ``GET /api/v2/list/goods/filter`` shows them."""
    discounted = p.discounted_kopecks / 100
    club = round(discounted * (100 - p.club_discount) / 100, 2)
    return {
        "nmID": p.nm_id,
        "vendorCode": p.vendor_code,
        "sizes": [
            {
                "sizeID": s.chrt_id,
                "price": p.price,
                "discountedPrice": discounted,
                "clubDiscountedPrice": club,
                "techSizeName": s.tech_size,
            }
            for s in p.sizes
        ],
        "currencyIsoCode4217": "RUB",
        "discount": p.discount,
        "clubDiscount": p.club_discount,
        "editableSizePrice": False,
        "wholesaleDiscountThreshold": [],
        "isBadTurnover": False,
    }


def _iso_ms(ts: int) -> str:
    # Cards carry UTC times with fractional seconds, like WB's "2023-12-06T11:17:00.96577Z".
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{(ts * 7919) % 1000:03d}Z"
