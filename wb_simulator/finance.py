"""The realization report (finance API): an append-only ledger of report lines per cabinet.

Day D's lines are written once, when D's daily report is created (D+1, 03:00 Moscow), from the
sales, returns and cancellations that happened on D. ``rrdId`` grows with every line written, so a
client paging by ``rrdId`` never misses a line, and a line never changes after it is written.

Lines of a day, in ``rrdId`` order:

- per sale (``S…``): a "Продажа" line (``docTypeName`` "Продажа", quantity 1) and a "Логистика"
  line (``deliveryService`` = the delivery cost, ``deliveryAmount`` 1);
- per return (``R…``): a "Возврат" line (``docTypeName`` "Возврат", quantity 1, amounts positive:
  a return *subtracts* them) and a "Логистика" line with ``returnAmount`` 1;
- per order refused more than a day after it was placed: a "Логистика" line (``returnAmount`` 1);
- one "Хранение" line (``nmId`` 0, ``paidStorage``);
- now and then a "Штраф" line on a product (``penalty``, ``bonusTypeName``);
- on Mondays a "Платная приемка" line (``nmId`` 0, ``paidAcceptance``) and an "Удержание" line
  (``nmId`` 0, ``deduction``).

Money, exact in kopecks: ``retailAmount`` = ``retailPriceWithDisc`` = the order's priceWithDisc;
``ppvzSalesCommission`` = round(retailAmount × commissionPercent / 100);
``acquiringFee`` = round(retailAmount × acquiringPercent / 100);
``forPay`` = retailAmount − ppvzSalesCommission − acquiringFee (equal to the sales feed's forPay).

Daily and weekly reports hold the same lines (same ``rrdId``); they differ in ``reportId``,
``dateFrom``/``dateTo``/``createDate``, and in when they appear (a weekly report on the Monday after
its week). A request's ``dateFrom``/``dateTo`` select lines by ``rrDate``.
"""

from __future__ import annotations

import bisect
from typing import Any

from wb_simulator import catalogs
from wb_simulator.disorder import PageDisorder
from wb_simulator.timefmt import DAY, day_number, day_start, dn_to_date, utc_z
from wb_simulator.world import ACQUIRING_PERCENT, Cabinet, Order, Product, rng_for

REPORT_HOUR = 3  # reports are created at 03:00 Moscow


def money(kopecks: int) -> str:
    """Kopecks as the finance API's money string: ``"367"``, ``"376.99"``, ``"-12.5"`` → ``"-12.50"``."""
    sign = "-" if kopecks < 0 else ""
    k = abs(kopecks)
    return f"{sign}{k // 100}" if k % 100 == 0 else f"{sign}{k // 100}.{k % 100:02d}"


def daily_created(dn: int) -> int:
    return day_start(dn + 1) + REPORT_HOUR * 3600


def week_monday(dn: int) -> int:
    return dn - (dn + 3) % 7


def weekly_created(dn: int) -> int:
    return day_start(week_monday(dn) + 7) + REPORT_HOUR * 3600


class Line:
    __slots__ = (
        "acceptance_k",
        "acquiring_k",
        "amount_k",
        "bonus",
        "commission_k",
        "deduction_k",
        "delivery_amount",
        "delivery_k",
        "dn",
        "for_pay_k",
        "kind",
        "order",
        "penalty_k",
        "product",
        "ref",
        "return_amount",
        "rrd_id",
        "storage_k",
    )

    def __init__(self, rrd_id: int, kind: str, dn: int, order: Order | None = None, product: Product | None = None):
        self.rrd_id = rrd_id
        self.kind = kind
        self.dn = dn
        self.order = order
        self.product = product if product is not None else (order.product if order is not None else None)
        self.amount_k = self.commission_k = self.acquiring_k = self.for_pay_k = 0
        self.delivery_k = self.penalty_k = self.storage_k = self.acceptance_k = self.deduction_k = 0
        self.delivery_amount = self.return_amount = 0
        self.bonus = ""
        #: The order a line on no product references by srid (``Disorder.service_lines``).
        self.ref: Order | None = None


OPER_NAMES = {
    "sale": ("Продажа", "Продажа"),
    "return": ("Возврат", "Возврат"),
    "logistics": ("", "Логистика"),
    "storage": ("", "Хранение"),
    "penalty": ("", "Штраф"),
    "acceptance": ("", "Платная приемка"),
    "deduction": ("", "Удержание"),
}


class Ledger:
    """Report lines of one cabinet, written day by day as reports are created."""

    def __init__(self, cabinet: Cabinet):
        self.cabinet = cabinet
        self.lines: list[Line] = []
        self.rrd_ids: list[int] = []
        self.day_start_index: dict[int, int] = {}
        #: Lines by the Moscow day of their source order (rrDate for lines without an order): the
        #: day РНП attributes them to.
        self.by_source_day: dict[int, list[Line]] = {}
        self.next_dn = cabinet.first_dn
        self._rrd = 1_000_000_000 * (cabinet.index + 1)
        disorder = cabinet.spec.disorder
        #: The paging disorder of the finance method (None: tidy pages).
        self.pages = PageDisorder(disorder, cabinet.seed, cabinet.id) if disorder is not None else None

    def ensure(self, t: int) -> None:
        """Write the lines of every day whose daily report exists at time ``t``."""
        while daily_created(self.next_dn) <= t:
            self.cabinet.ensure(daily_created(self.next_dn))
            self.day_start_index[self.next_dn] = len(self.lines)
            self._write_day(self.next_dn, daily_created(self.next_dn))
            self.next_dn += 1

    def _add(
        self, kind: str, dn: int, order: Order | None = None, product: Product | None = None, ref: Order | None = None
    ) -> Line:
        self._rrd += 1
        line = Line(self._rrd, kind, dn, order, product)
        line.ref = ref
        self.lines.append(line)
        source = order or ref
        # An order outside the orders feed (a foreign return's) can only be placed on the line's day.
        source_day = day_number(source.date) if source is not None and source.idx >= 0 else dn
        self.by_source_day.setdefault(source_day, []).append(line)
        self.rrd_ids.append(self._rrd)
        return line

    def _write_day(self, dn: int, created: int) -> None:
        cab = self.cabinet
        lo, hi = day_start(dn), day_start(dn + 1)
        for o, kind in cab.sales_between(lo, hi, created):
            line = self._add("return" if kind else "sale", dn, o)
            line.amount_k = o.pwd_k
            line.commission_k = round(o.pwd_k * o.product.commission / 100)
            line.acquiring_k = round(o.pwd_k * ACQUIRING_PERCENT / 100)
            line.for_pay_k = o.pwd_k - line.commission_k - line.acquiring_k
            logistics = self._add("logistics", dn, o)
            logistics.delivery_k = delivery_cost(o)
            if kind:
                logistics.return_amount = 1
            else:
                logistics.delivery_amount = 1
        i = bisect.bisect_left(cab.order_events, (lo, -1))
        while i < len(cab.order_events) and cab.order_events[i][0] < hi:
            ts, idx = cab.order_events[i]
            i += 1
            o = cab.orders[idx]
            if o.cancel_at == ts and ts - o.date > DAY:
                line = self._add("logistics", dn, o)
                line.delivery_k = delivery_cost(o)
                line.return_amount = 1
        rng = rng_for(cab.seed, "ledger", cab.id, dn)
        self._add("storage", dn).storage_k = int(rng.integers(50, 300)) * max(1, len(cab.products)) * 10
        if rng.random() < 0.07:
            product = cab.products[int(rng.integers(0, len(cab.products)))]
            line = self._add("penalty", dn, product=product)
            line.penalty_k = int(rng.integers(100, 1000)) * 100
            line.bonus = catalogs.PENALTY_REASONS[int(rng.integers(0, len(catalogs.PENALTY_REASONS)))]
        if (dn + 3) % 7 == 0:  # Monday
            self._add("acceptance", dn).acceptance_k = int(rng.integers(5, 30)) * 10_000
            self._add("deduction", dn).deduction_k = int(rng.integers(1, 10)) * 50_000
        disorder = cab.spec.disorder
        if disorder is not None and disorder.service_lines:
            self._service_lines(dn, disorder.service_lines)

    def _service_lines(self, dn: int, rate: float) -> None:
        """``Disorder.service_lines``: a penalty and a logistics correction on nmId 0 that reference
        an order of the last 10 days by srid."""
        cab = self.cabinet
        rng = rng_for(cab.seed, "disorder-ledger", cab.id, dn)
        if rng.random() >= rate:
            return
        lo = bisect.bisect_left(cab.order_ts, day_start(dn - 10))
        hi = bisect.bisect_left(cab.order_ts, day_start(dn + 1))
        if lo >= hi:
            return
        ref = cab.orders[int(rng.integers(lo, hi))]
        penalty = self._add("penalty", dn, ref=ref)
        penalty.penalty_k = int(rng.integers(100, 1000)) * 100
        penalty.bonus = catalogs.PENALTY_REASONS[int(rng.integers(0, len(catalogs.PENALTY_REASONS)))]
        self._add("logistics", dn, ref=ref).delivery_k = int(rng.integers(10, 200)) * 100

    def select(self, from_dn: int, to_dn: int, after_rrd: int, limit: int, t: int, period: str) -> list[Line]:
        """Lines with rrDate in [from_dn, to_dn] and rrdId > after_rrd, in rrdId order, visible at ``t``."""
        self.ensure(t)
        if period == "weekly":
            # Only weeks whose report exists by now.
            while to_dn >= from_dn and weekly_created(to_dn) > t:
                to_dn = week_monday(to_dn) - 1
        lo = self._index_of_day(from_dn)
        hi = self._index_of_day(to_dn + 1)
        start = max(lo, bisect.bisect_right(self.rrd_ids, after_rrd, lo, hi))
        return self.lines[start : min(hi, start + limit)]

    def _index_of_day(self, dn: int) -> int:
        if dn < self.cabinet.first_dn:
            return 0
        if dn >= self.next_dn:
            return len(self.lines)
        return self.day_start_index[dn]

    def render(self, line: Line, period: str) -> dict[str, Any]:
        cab = self.cabinet
        if period == "weekly":
            first = week_monday(line.dn)
            last = first + 6
            report_id = (cab.index + 1) * 10**7 + 5 * 10**6 + first // 7
        else:
            first = last = line.dn
            report_id = (cab.index + 1) * 10**7 + line.dn
        o, p = line.order, line.product
        doc_type, oper = OPER_NAMES[line.kind]
        office = catalogs.OFFICES[(o.idx if o else line.rrd_id) % len(catalogs.OFFICES)]
        sold = line.kind in ("sale", "return")
        commission = p.commission if p is not None and sold else 0
        vw_k = line.commission_k - round(line.commission_k * 20 / 120) if sold else 0
        row: dict[str, Any] = {
            "reportId": report_id,
            "dateFrom": dn_to_date(first).isoformat(),
            "dateTo": dn_to_date(last).isoformat(),
            "createDate": dn_to_date(last + 1).isoformat(),
            "currency": "RUB",
            "reportType": 1,
            "rrdId": line.rrd_id,
            "giId": o.income_id if o else 0,
            "dlvPrc": 1.8 if line.kind == "logistics" else 0,
            "fixTariffDateFrom": dn_to_date(first).isoformat(),
            "fixTariffDateTo": dn_to_date(last).isoformat(),
            "subjectName": p.subject_name if p else "",
            "nmId": p.nm_id if p else 0,
            "brandName": p.brand if p else "",
            "vendorCode": p.vendor_code if p else "",
            "title": p.title if p else "",
            "techSize": o.size.tech_size if o else "",
            "sku": o.size.barcode if o else "",
            "docTypeName": doc_type,
            "quantity": 1 if sold else 0,
            "retailPrice": money(o.total_price * 100) if o and sold else "0",
            "retailAmount": money(line.amount_k),
            "salePercent": o.discount if o and sold else 0,
            "commissionPercent": commission,
            "officeName": catalogs.STOCK_WAREHOUSES[o.warehouse][1] if o else "",
            "sellerOperName": oper,
            "orderDt": utc_z(o.date) if o else utc_z(day_start(line.dn)),
            "saleDt": utc_z(_sale_time(line)) if o else utc_z(day_start(line.dn)),
            "rrDate": dn_to_date(line.dn).isoformat(),
            "shkId": int(o.sticker) if o else 0,
            "retailPriceWithDisc": money(o.pwd_k) if o and sold else "0",
            "deliveryAmount": line.delivery_amount,
            "returnAmount": line.return_amount,
            "deliveryService": money(line.delivery_k),
            "giBoxTypeName": "Короб" if o else "",
            "productDiscountForReport": o.discount if o and sold else 0,
            "sellerPromo": "0",
            "spp": o.spp if o and sold else 0,
            "kvwBase": commission,
            "kvw": commission,
            "supRatingUp": 0,
            "isKgvpV2": 0,
            "ppvzSalesCommission": money(line.commission_k),
            "forPay": money(line.for_pay_k),
            "ppvzReward": "0",
            "acquiringFee": money(line.acquiring_k),
            "acquiringPercent": ACQUIRING_PERCENT if sold else 0,
            "paymentProcessing": "Комиссия за организацию платежа с НДС" if sold else "",
            "acquiringBank": catalogs.ACQUIRING_BANKS[o.idx % len(catalogs.ACQUIRING_BANKS)] if o and sold else "",
            "vw": money(vw_k),
            "vwNds": money(line.commission_k - vw_k if sold else 0),
            "ppvzOfficeName": office[1],
            "ppvzOfficeId": office[0],
            "ppvzSupplierName": cab.name,
            "ppvzSupplierInn": cab.tin,
            "declarationNumber": "",
            "stickerId": o.sticker if o else "",
            "country": catalogs.REGIONS[o.region][0] if o else "Россия",
            "srvDbs": False,
            "penalty": money(line.penalty_k),
            "additionalPayment": "0",
            "rebillLogisticCost": "0",
            "paidStorage": money(line.storage_k),
            "deduction": money(line.deduction_k),
            "paidAcceptance": money(line.acceptance_k),
            "orderId": 0,
            "isB2b": False,
            "trbxId": "",
            "installmentCofinancingAmount": "0",
            "wibesDiscountPercent": 0,
            "cashbackAmount": "0",
            "cashbackDiscount": "0",
            "cashbackCommissionChange": "0",
            "paymentSchedule": "0",
            "deliveryMethod": "FBW" if o else "",
            "sellerPromoId": 0,
            "sellerPromoDiscount": 0,
            "loyaltyId": 0,
            "loyaltyDiscount": 0,
            "uuidPromocode": "",
            "salePricePromocodeDiscountPrc": 0,
            "articleSubstitution": "",
            "salePriceAffiliatedDiscountPrc": 0,
            "salePriceWholesaleDiscountPrc": 0,
            "b2bCustomerTin": "",
            "paidWithSocialCertificate": False,
            "warehouseLogisticsCoeff": 1 if line.kind == "logistics" else 0,
            "orderUid": o.g_number if o else "",
            "srid": o.srid if o else (line.ref.srid if line.ref is not None else ""),
        }
        if line.bonus:
            row["bonusTypeName"] = line.bonus
        return row


def _sale_time(line: Line) -> int:
    o = line.order
    assert o is not None
    if line.kind == "return" or (line.kind == "logistics" and line.return_amount):
        return o.return_at or o.cancel_at or o.date
    return o.sale_at or o.date


def delivery_cost(o: Order) -> int:
    """Logistics of one unit, kopecks: 45 ₽ to 75 ₽ depending on the product."""
    return 4_500 + (o.product.nm_id % 7) * 500


def line_amounts(line: Line) -> dict[str, int]:
    """The line's money fields in kopecks (what the truth sums)."""
    return {
        "retail_amount": line.amount_k,
        "for_pay": line.for_pay_k,
        "commission": line.commission_k,
        "acquiring": line.acquiring_k,
        "logistics": line.delivery_k,
        "penalty": line.penalty_k,
        "storage": line.storage_k,
        "acceptance": line.acceptance_k,
        "deduction": line.deduction_k,
    }
