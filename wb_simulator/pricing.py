"""Price and discount upload tasks (``POST /api/v2/upload/task``) and their results.

A task is processed as soon as it is accepted: each item either changes the product's price and
discount (item status 2) or fails with WB's error text (status 3). The task's status is 3 when every
item succeeded, 5 when some failed, 6 when all failed. Rules, as WB documents them:

- the same set of items as an earlier task answers 208 with that task's id ("already exists");
- an item whose new discounted price is at least 3 times lower than the current one goes to price
  quarantine: it keeps the old price and fails with the quarantine text;
- an item for an unknown nmID fails with "Invalid item No.";
- a task whose every item is unknown or already at the requested price is refused with 400.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from wb_simulator.timefmt import utc_z
from wb_simulator.world import Cabinet, Product

QUARANTINE_TEXT = "The new price is several times lower than the current price. Item has been moved to Price Quarantine"
UNKNOWN_ITEM_TEXT = "Invalid item No."


class UploadRefused(Exception):
    """A 400 for the whole task; ``text`` is WB's errorText."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


@dataclass
class PriceTask:
    upload_id: int
    created: int
    signature: tuple[tuple[int, int | None, int | None], ...]
    goods: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> int:
        ok = sum(1 for g in self.goods if g["status"] == 2)
        if ok == len(self.goods):
            return 3
        return 6 if ok == 0 else 5

    def summary(self) -> dict[str, Any]:
        ok = sum(1 for g in self.goods if g["status"] == 2)
        return {
            "uploadID": self.upload_id,
            "status": self.status,
            "uploadDate": utc_z(self.created),
            "activationDate": utc_z(self.created),
            "overAllGoodsNumber": len(self.goods),
            "successGoodsNumber": ok,
        }


class PriceBook:
    """One cabinet's upload tasks."""

    def __init__(self, cab: Cabinet, first_id: int):
        self.cab = cab
        self.tasks: dict[int, PriceTask] = {}
        self._by_signature: dict[tuple[tuple[int, int | None, int | None], ...], int] = {}
        self._next_id = first_id

    def upload(self, items: list[dict[str, Any]], t: int) -> tuple[PriceTask, bool]:
        """Validate and apply a task; returns (task, already_exists). Raises UploadRefused (400)."""
        if not items:
            raise UploadRefused("Empty data")
        if len(items) > 1000:
            raise UploadRefused("Upload limit exceeded: You can upload a maximum of 1 000 items")
        parsed: list[tuple[int, int | None, int | None]] = []
        for item in items:
            if not isinstance(item, dict):
                raise UploadRefused("Invalid data format")
            nm, raw_price, raw_discount = item.get("nmID"), item.get("price"), item.get("discount")
            if not _is_int(nm) or nm <= 0:
                raise UploadRefused("Invalid item No.")
            if raw_price is None and raw_discount is None:
                raise UploadRefused("Price and discount not specified")
            price: int | None = None
            if raw_price is not None:
                if isinstance(raw_price, float) and not raw_price.is_integer():
                    raise UploadRefused("Price should be a whole number")
                if not isinstance(raw_price, int | float) or isinstance(raw_price, bool) or raw_price <= 0:
                    raise UploadRefused("Invalid price value")
                price = int(raw_price)
            discount: int | None = None
            if raw_discount is not None:
                if not _is_int(raw_discount) or not 0 <= raw_discount < 100:
                    raise UploadRefused("Invalid discount value")
                discount = raw_discount
            parsed.append((nm, price, discount))
        if len({nm for nm, _, _ in parsed}) != len(parsed):
            raise UploadRefused("Duplicate item Nos.")
        signature = tuple(sorted(parsed))
        if signature in self._by_signature:
            return self.tasks[self._by_signature[signature]], True
        changes: list[tuple[int, Product | None, int | None, int | None]] = []
        for nm, price, discount in parsed:
            p = self.cab.by_nm.get(nm)
            if p is None:
                changes.append((nm, None, price, discount))
                continue
            changes.append((nm, p, p.price if price is None else price, p.discount if discount is None else discount))
        if all(p is None or (p.price, p.discount) == (np_, nd) for _, p, np_, nd in changes):
            if all(p is None for _, p, _, _ in changes):
                raise UploadRefused(
                    "All item Nos. are specified incorrectly, or the specified prices and discounts are already set"
                )
            raise UploadRefused("The specified prices and discounts are already set")
        task = PriceTask(self._next_id, t, signature)
        self._next_id += 1
        for nm, p, new_price, new_discount in changes:
            if p is None:
                task.goods.append(_good(nm, "", new_price, new_discount or 0, 3, UNKNOWN_ITEM_TEXT))
                continue
            assert new_price is not None and new_discount is not None  # filled from the product above
            old_k = p.discounted_kopecks
            new_k = round(new_price * (100 - new_discount))
            if new_k * 3 <= old_k:
                task.goods.append(_good(nm, p.vendor_code, new_price, new_discount, 3, QUARANTINE_TEXT))
                continue
            p.price, p.discount = new_price, new_discount
            task.goods.append(_good(nm, p.vendor_code, new_price, new_discount, 2, None))
        self.tasks[task.upload_id] = task
        self._by_signature[signature] = task.upload_id
        return task, False


def _good(nm: int, vendor: str, price: int | None, discount: int, status: int, error: str | None) -> dict[str, Any]:
    return {
        "nmID": nm,
        "vendorCode": vendor,
        "sizeID": None,
        "techSizeName": "",
        "price": price,
        "currencyIsoCode4217": "RUB",
        "discount": discount,
        "clubDiscount": None,
        "status": status,
        "errorText": error,
    }


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
