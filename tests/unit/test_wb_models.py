"""Parsing WB's JSON into typed rows: Moscow time, exact money, WB's "no date", strict types."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

import msgspec
import pytest

from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.wb import Order, ReportLine, Sale
from optima_pipelines.wb.http import _field_path, token_type_of

ORDER = (
    b'{"date":"2022-03-04T23:08:31","lastChangeDate":"2022-03-06T10:11:07.25","warehouseName":"\xd0\x9f",'
    b'"warehouseType":"\xd0\xa1","countryName":"R","oblastOkrugName":"C","regionName":"M","supplierArticle":"12345",'
    b'"nmId":1234567,"barcode":"123453559000","category":"c","subject":"s","brand":"b","techSize":"0",'
    b'"incomeID":56735459,"isSupply":false,"isRealization":true,"totalPrice":1887.10,"discountPercent":18,'
    b'"spp":26.5,"finishedPrice":1145.33,"priceWithDisc":1547.0000000000001,"isCancel":true,'
    b'"cancelDate":"%s","sticker":"926912515","gNumber":"343","srid":"11.rf9ef"}'
)


def test_an_order_is_typed_in_moscow_time_with_exact_money():
    order = msgspec.json.decode(ORDER % b"2022-03-09T00:00:00", type=Order)
    assert order.date == datetime(2022, 3, 4, 23, 8, 31, tzinfo=MOSCOW)
    assert order.date.utcoffset() == timedelta(hours=3)
    assert order.day == date(2022, 3, 4)  # 20:08 UTC: still the 4th in Moscow
    assert order.last_change_date == datetime(2022, 3, 6, 10, 11, 7, 250000, tzinfo=MOSCOW)
    # Decimal straight from the JSON text: no float on the way (1887.1 stays 1887.10, the
    # seventeen-digit value is not rounded to 1547.0).
    assert str(order.total_price) == "1887.10"
    assert order.price_with_disc == Decimal("1547.0000000000001")
    assert order.spp == Decimal("26.5")
    assert order.income_id == 56735459
    assert order.cancel_date == datetime(2022, 3, 9, tzinfo=MOSCOW)


def test_wbs_empty_cancel_date_is_none():
    order = msgspec.json.decode(ORDER % b"0001-01-01T00:00:00", type=Order)
    assert order.cancel_date is None


def test_copy_rows_follow_the_columns():
    order = msgspec.json.decode(ORDER % b"0001-01-01T00:00:00", type=Order)
    row = dict(zip(Order.COLUMNS, order.copy_row(), strict=True))
    assert row["srid"] == "11.rf9ef"
    assert row["day"] == date(2022, 3, 4)
    assert row["g_number"] == "343"
    assert row["income_id"] == 56735459
    assert row["cancel_date"] is None
    assert row["total_price"] == Decimal("1887.10")


def test_a_return_is_told_from_a_sale_by_its_sale_id():
    body = (
        b'{"date":"2026-08-01T10:00:00","lastChangeDate":"2026-08-01T10:00:00","nmId":1,"totalPrice":100,'
        b'"discountPercent":0,"spp":0,"paymentSaleAmount":0,"forPay":-87.5,"finishedPrice":100,'
        b'"priceWithDisc":100,"saleID":"R12345","srid":"s1"}'
    )
    sale = msgspec.json.decode(body, type=Sale)
    row = dict(zip(Sale.COLUMNS, sale.copy_row(), strict=True))
    assert row["is_return"] is True and row["sale_id"] == "R12345" and row["for_pay"] == Decimal("-87.5")


def _report_line(**overrides: object) -> dict[str, object]:
    money = "0"
    line: dict[str, object] = {
        "reportId": 1,
        "dateFrom": "2026-07-27",
        "dateTo": "2026-08-02",
        "createDate": "2026-08-03",
        "currency": "RUB",
        "reportType": 1,
        "rrdId": 101,
        "giId": 5,
        "dlvPrc": 1.5,
        "fixTariffDateFrom": "2026-01-01",
        "fixTariffDateTo": "2026-12-31",
        "subjectName": "s",
        "nmId": 7,
        "brandName": "b",
        "vendorCode": "v",
        "title": "t",
        "techSize": "0",
        "sku": "123",
        "docTypeName": "Продажа",
        "quantity": 1,
        "retailPrice": "1200.50",
        "retailAmount": "367",
        "salePercent": 10,
        "commissionPercent": 19.5,
        "officeName": "o",
        "sellerOperName": "Продажа",
        "orderDt": "2026-07-30T23:30:00Z",
        "saleDt": "2026-08-01T12:00:00+03:00",
        "rrDate": "2026-08-01",
        "shkId": 9,
        "retailPriceWithDisc": "1080.45",
        "deliveryAmount": 0,
        "returnAmount": 0,
        "deliveryService": "55.10",
        "giBoxTypeName": "box",
        "productDiscountForReport": 10,
        "sellerPromo": money,
        "spp": 5,
        "kvwBase": 0.1,
        "kvw": 0.1,
        "supRatingUp": 0,
        "isKgvpV2": 0,
        "ppvzSalesCommission": money,
        "forPay": "376.99",
        "ppvzReward": money,
        "acquiringFee": "12.01",
        "acquiringPercent": 1.1,
        "paymentProcessing": "p",
        "acquiringBank": "bank",
        "vw": "100.10",
        "vwNds": "20.02",
        "ppvzOfficeName": "o",
        "ppvzOfficeId": 3,
        "ppvzSupplierName": "n",
        "ppvzSupplierInn": "123",
        "declarationNumber": "",
        "stickerId": "st",
        "country": "RU",
        "srvDbs": False,
        "penalty": money,
        "additionalPayment": money,
        "rebillLogisticCost": money,
        "paidStorage": "3.50",
        "deduction": money,
        "paidAcceptance": money,
        "orderId": 11,
        "isB2b": False,
        "trbxId": "",
        "installmentCofinancingAmount": money,
        "wibesDiscountPercent": 0,
        "cashbackAmount": money,
        "cashbackDiscount": money,
        "cashbackCommissionChange": money,
        "paymentSchedule": money,
        "deliveryMethod": "FBW",
        "orderUid": "u",
        "srid": "s1",
    }
    line.update(overrides)
    return line


def test_finance_money_strings_become_exact_decimals():
    line = msgspec.json.decode(msgspec.json.encode([_report_line()]), type=list[ReportLine])[0]
    assert line.retail_price == Decimal("1200.50")
    assert line.for_pay == Decimal("376.99")
    assert line.vw_nds == Decimal("20.02")
    assert line.commission_percent == Decimal("19.5")
    assert line.order_dt == datetime(2026, 7, 31, 2, 30, tzinfo=MOSCOW)
    row = dict(zip(ReportLine.COLUMNS, line.copy_row(), strict=True))
    assert row["day"] == date(2026, 8, 1) and row["rrd_id"] == 101 and row["paid_storage"] == Decimal("3.50")


@pytest.mark.parametrize(
    ("override", "problem", "path"),
    [
        ({"forPay": "12,5"}, "Invalid decimal string", "$[0].forPay"),
        ({"nmId": "7"}, "Expected `int | null`, got `str`", "$[0].nmId"),
        ({"rrdId": None}, "Expected `int`, got `null`", "$[0].rrdId"),
    ],
)
def test_a_bad_field_is_named_with_its_path(override, problem, path):
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(msgspec.json.encode([_report_line(**override)]), type=list[ReportLine])
    assert _field_path(str(caught.value)) == (problem, path)


def test_a_missing_field_is_named_with_its_path():
    line = _report_line()
    del line["srid"]
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(msgspec.json.encode([_report_line(), line]), type=list[ReportLine])
    assert _field_path(str(caught.value)) == ("required field 'srid' is missing", "$[1].srid")


def test_the_token_type_is_read_from_a_wb_jwt():
    import base64
    import json

    def jwt(payload: dict[str, object]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
        return f"eyJhbGciOiJFUzI1NiJ9.{body}.c2ln"

    assert token_type_of(jwt({"acc": 3, "for": "self"})) == "personal"
    assert token_type_of(jwt({"acc": 1})) == "base"
    assert token_type_of(jwt({"acc": 4})) == "service"
    assert token_type_of("not-a-jwt") is None
    assert token_type_of("a.%%%.c") is None
