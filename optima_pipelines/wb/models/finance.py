"""WB's finance API (finance-api): the realization report (``WbClient.iter_report_lines``).

The conventions of every model are in ``optima_pipelines.wb.models``."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import msgspec

from optima_pipelines.wb.models.base import Row, table, to_moscow_or_none


@table
class ReportLine(Row, rename="camel", kw_only=True):
    """One line of the realization report (``POST /api/finance/v1/sales-reports/detailed``); table
    ``wb_report_lines``. WB sends money as strings here; they become Decimal unchanged."""

    DERIVED = ("day",)
    WHEN = ("rr_date", "sale_dt", "order_dt")
    ROW_KEY = ("rrd_id", "srid", "nm_id")

    rrd_id: int
    report_id: int
    date_from: date
    date_to: date
    create_date: date
    currency: str
    report_type: int
    gi_id: int
    subject_name: str
    #: Absent or null: a line tied to no product (storage, a penalty, a deduction on the cabinet). It
    #: is stored with nm_id NULL; the РНП counts it under nm_id 0 with the day's other such lines.
    nm_id: int | None = None
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
        self.order_dt = to_moscow_or_none(self.order_dt)
        self.sale_dt = to_moscow_or_none(self.sale_dt)

    @property
    def day(self) -> date:
        """The line's own Moscow date (``rrDate``)."""
        return self.rr_date

    def derived(self) -> tuple[Any, ...]:
        return (self.rr_date,)
