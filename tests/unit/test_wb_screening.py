"""WB's rows judged one by one (``wb.screening``): each kind of bad value refuses its row alone, a row
from the future is flagged, and a clean answer decodes exactly as msgspec alone decodes it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest

from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.wb.models.finance import ReportLine
from optima_pipelines.wb.models.statistics import Order
from optima_pipelines.wb.screening import decode_rows
from tests.unit.test_wb_models import _report_line

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=MOSCOW)
ORDER = {
    "srid": "s0",
    "date": "2026-11-01T10:00:00",
    "lastChangeDate": "2026-11-01T10:00:00",
    "gNumber": "34343462218572569531",  # WB's 20-digit ids are not amounts
    "nmId": 5,
    "totalPrice": 1000,
    "priceWithDisc": 750.5,
    "cancelDate": "0001-01-01T00:00:00",
}


def fail(problem: str, field: str | None) -> Exception:
    return AssertionError(f"the page failed: {problem} at {field}")


def orders(*changes: dict[str, Any]) -> bytes:
    rows = [{**ORDER, "srid": f"s{i}", **change} for i, change in enumerate(changes)]
    return msgspec.json.encode(rows)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"priceWithDisc": "NaN"}, "priceWithDisc NaN is not a number"),
        ({"totalPrice": "-Infinity"}, "totalPrice -Infinity is not a number"),
        ({"totalPrice": "__1e400__"}, "totalPrice 1E+400 is out of range (|x| ≥ 10^15)"),
        ({"totalPrice": 10**15}, "totalPrice 1000000000000000 is out of range (|x| ≥ 10^15)"),
        ({"nmId": 2**63}, "nmId 9223372036854775808 is out of range (beyond a 64-bit integer)"),
        ({"date": "9999-12-31T00:00:00"}, "date 9999-12-31T00:00:00+03:00 is out of range (2000-01-01 to 2100-12-31)"),
        ({"date": "1970-01-01T00:00:00"}, "date 1970-01-01T00:00:00+03:00 is out of range (2000-01-01 to 2100-12-31)"),
        ({"nmId": "7"}, "nmId: Expected `int`, got `str`"),
        ({"srid": None}, "srid: Expected `str`, got `null`"),
    ],
)
def test_a_bad_value_refuses_its_row_alone(change: dict[str, Any], reason: str) -> None:
    body = orders({}, change, {}).replace(b'"__1e400__"', b"1e400")
    rows, screening = decode_rows(body, list[Order], NOW, fail, "GET statistics /api/v1/supplier/orders")
    assert [o.srid for o in rows] == ["s0", "s2"]
    (refused,) = screening.refused
    assert refused.reason == reason and refused.outcome == "refused"
    assert refused.endpoint == "GET statistics /api/v1/supplier/orders"
    assert refused.raw.startswith('{"srid":') or refused.raw.startswith('{"srid":null')
    assert not screening.flagged


def test_a_row_from_the_future_is_kept_and_flagged_and_one_within_the_allowance_is_not() -> None:
    soon = (NOW + timedelta(minutes=50)).replace(tzinfo=None).isoformat()
    later = (NOW + timedelta(days=30)).replace(tzinfo=None).isoformat()
    rows, screening = decode_rows(orders({"lastChangeDate": soon}, {"lastChangeDate": later}), list[Order], NOW, fail)
    assert [o.srid for o in rows] == ["s0", "s1"]
    (flagged,) = screening.flagged
    assert flagged.field == "lastChangeDate" and flagged.key == "srid=s1, nmId=5"
    assert screening.is_flagged(rows[1]) and not screening.is_flagged(rows[0])


def test_a_clean_answer_decodes_as_msgspec_alone_decodes_it() -> None:
    body = orders({}, {"priceWithDisc": 12.25}, {"cancelDate": "2026-11-02T10:00:00", "isCancel": True})
    rows, screening = decode_rows(body, list[Order], NOW, fail)
    assert not screening and rows == msgspec.json.decode(body, type=list[Order])


def test_finance_money_as_a_long_string_is_refused_though_ids_are_long_digit_strings_too() -> None:
    lines = [_report_line(rrdId=1), _report_line(rrdId=2, forPay="12345678901234567"), _report_line(rrdId=3)]
    rows, screening = decode_rows(msgspec.json.encode(lines), list[ReportLine], NOW, fail)
    assert [line.rrd_id for line in rows] == [1, 3]
    assert [v.reason for v in screening.refused] == ["forPay 12345678901234567 is out of range (|x| ≥ 10^15)"]


def test_a_bad_envelope_still_fails_the_page() -> None:
    from optima_pipelines.wb.models.prices import _GoodsResponse

    with pytest.raises(msgspec.ValidationError, match=r"\$\.errorText"):
        decode_rows(b'{"data": {"listGoods": []}, "errorText": 5}', _GoodsResponse, NOW, fail)
