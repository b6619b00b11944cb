"""The WB client's parse path: JSON bytes of N statistics orders → typed rows ready for COPY.

Two ways to the same rows, measured in the same run on the same bytes:

- baseline: stdlib ``json.loads`` (``parse_float=Decimal`` so money stays exact), then validation
  and conversion by hand (required fields and types checked field by field, timestamps parsed)
  into the same ``Order`` structs (whose ``__post_init__``, run by both paths, puts timestamps in
  Moscow time and WB's 0001-01-01 cancelDate to None);
- the client's parser: ``msgspec.json.decode(body, type=list[Order])``, which validates and
  converts in one pass in C.

Both then produce COPY tuples (``order.copy_row()``). Both results are compared for equality before
any figure is printed.

A third figure is what judging every row costs (``wb.screening.decode_rows``, the client's path since
issue 37: a bad value refuses its row, a row from the future is flagged), against the plain msgspec
decode of the same bytes, on a clean body and on one holding a NaN amount (whose row is then
refused, and the raw answer read a second time for the operator's record).

    python bench/wb_parse.py [--quick] [--rows 200000] [--repeat 3]
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.timeutil import now_moscow
from optima_pipelines.wb import Order
from optima_pipelines.wb.screening import decode_rows


def make_body(rows: int, seed: int = 1, offset: int = 0) -> bytes:
    """WB's orders feed as WB sends it: camelCase, naive Moscow timestamps, money as JSON numbers.
    Orders are numbered from ``offset`` (their srids differ from other pages')."""
    rng = random.Random(seed)
    start = datetime(2026, 5, 1)
    items = []
    for i in range(offset, offset + rows):
        date = start + timedelta(seconds=i * 7 + rng.randrange(7))
        total = rng.randrange(300, 20000)
        discount = rng.randrange(0, 70)
        with_disc = round(total * (100 - discount) / 100, 2)
        cancelled = rng.random() < 0.1
        items.append(
            {
                "date": date.isoformat(),
                "lastChangeDate": (date + timedelta(hours=rng.randrange(1, 72))).isoformat(),
                "warehouseName": "Коледино",
                "warehouseType": "Склад WB",
                "countryName": "Россия",
                "oblastOkrugName": "Центральный федеральный округ",
                "regionName": "Московская",
                "supplierArticle": f"ART-{i % 500}",
                "nmId": 100000 + i % 500,
                "barcode": f"2040{i % 500:09d}",
                "category": "Одежда",
                "subject": "Футболки",
                "brand": "Бренд",
                "techSize": "M",
                "incomeID": 5000000 + i % 97,
                "isSupply": False,
                "isRealization": True,
                "totalPrice": total,
                "discountPercent": discount,
                "spp": rng.randrange(0, 30),
                "finishedPrice": round(with_disc * 0.9, 2),
                "priceWithDisc": with_disc,
                "isCancel": cancelled,
                "cancelDate": (date + timedelta(hours=5)).isoformat() if cancelled else "0001-01-01T00:00:00",
                "sticker": str(900000000 + i),
                "gNumber": f"G{i // 3}",
                "srid": f"{i}.rf{i:08x}.0.0",
            }
        )
    return json.dumps(items, ensure_ascii=False).encode()


# --- the baseline: stdlib json + validation and conversion by hand ------------------------------

_STR, _INT, _BOOL, _MONEY, _TS = "str", "int", "bool", "money", "ts"
_FIELDS: list[tuple[str, str, str, bool]] = [  # attribute, WB key, kind, required
    ("srid", "srid", _STR, True),
    ("date", "date", _TS, True),
    ("last_change_date", "lastChangeDate", _TS, True),
    ("g_number", "gNumber", _STR, False),
    ("warehouse_name", "warehouseName", _STR, False),
    ("warehouse_type", "warehouseType", _STR, False),
    ("country_name", "countryName", _STR, False),
    ("oblast_okrug_name", "oblastOkrugName", _STR, False),
    ("region_name", "regionName", _STR, False),
    ("supplier_article", "supplierArticle", _STR, False),
    ("nm_id", "nmId", _INT, True),
    ("barcode", "barcode", _STR, False),
    ("category", "category", _STR, False),
    ("subject", "subject", _STR, False),
    ("brand", "brand", _STR, False),
    ("tech_size", "techSize", _STR, False),
    ("income_id", "incomeID", _INT, False),
    ("is_supply", "isSupply", _BOOL, False),
    ("is_realization", "isRealization", _BOOL, False),
    ("total_price", "totalPrice", _MONEY, False),
    ("discount_percent", "discountPercent", _INT, False),
    ("spp", "spp", _MONEY, False),
    ("finished_price", "finishedPrice", _MONEY, False),
    ("price_with_disc", "priceWithDisc", _MONEY, False),
    ("is_cancel", "isCancel", _BOOL, False),
    ("cancel_date", "cancelDate", _TS, False),
    ("sticker", "sticker", _STR, False),
]


def _ts(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a timestamp string")
    return datetime.fromisoformat(value)


def parse_stdlib(body: bytes) -> list[Order]:
    data = json.loads(body, parse_float=Decimal)
    if not isinstance(data, list):
        raise ValueError("$: expected an array")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ValueError(f"$[{i}]: expected an object")
        values: dict[str, Any] = {}
        for attr, key, kind, required in _FIELDS:
            value = item.get(key)
            where = f"$[{i}].{key}"
            if value is None:
                if required:
                    raise ValueError(f"{where}: required field missing")
                continue  # Order's default (None; isCancel False)
            if kind == _STR:
                if not isinstance(value, str):
                    raise ValueError(f"{where}: expected a string")
            elif kind == _INT:
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ValueError(f"{where}: expected an integer")
            elif kind == _BOOL:
                if not isinstance(value, bool):
                    raise ValueError(f"{where}: expected a boolean")
            elif kind == _MONEY:
                if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
                    raise ValueError(f"{where}: expected a number")
                value = Decimal(value)
            else:
                value = _ts(value, where)
            values[attr] = value
        # Order's __post_init__ (run by msgspec too) puts timestamps in Moscow time and turns
        # WB's 0001-01-01 into None.
        out.append(Order(**values))
    return out


def parse_msgspec(body: bytes) -> list[Order]:
    return msgspec.json.decode(body, type=list[Order])


def parse_screened(body: bytes) -> list[Order]:
    rows, _ = decode_rows(body, list[Order], now_moscow(), lambda problem, field: ValueError(problem))
    return rows


def to_copy_rows(rows: list[Order]) -> list[tuple[Any, ...]]:
    return [r.copy_row() for r in rows]


TITLE = "WB client parse path: orders JSON → typed rows → COPY tuples, msgspec vs stdlib json"
OPTIONS = [
    Option("rows", 200_000, 20_000, "orders in the JSON body"),
    Option("repeat", 3, 1, "timed repetitions (the best counts)"),
]


def run(bench: Bench, opts: Any) -> None:
    body = make_body(opts.rows)
    harness.say(f"  {opts.rows:,} WB orders, {len(body) / 1e6:.1f} MB of JSON; best of {opts.repeat}")
    results = {}
    for name, parse in (("stdlib", parse_stdlib), ("msgspec", parse_msgspec)):
        parse_s, _ = harness.best_of(opts.repeat, lambda parse=parse: parse(body))
        total_s, copy_rows = harness.best_of(opts.repeat, lambda parse=parse: to_copy_rows(parse(body)))
        results[name] = (parse_s, total_s, copy_rows)
    if results["stdlib"][2] != results["msgspec"][2]:
        raise RuntimeError("the two parsers disagree: no figures")
    baseline = "stdlib json + validation by hand"
    bench.figure(f"parse {opts.rows // 1000}k orders to typed rows (client, msgspec)", opts.rows / results["msgspec"][0],
                 "rows/s", baseline_name=baseline, baseline=opts.rows / results["stdlib"][0], higher_is_better=True)  # fmt: skip
    bench.figure(f"parse {opts.rows // 1000}k orders to COPY tuples (client, msgspec)", opts.rows / results["msgspec"][1],
                 "rows/s", baseline_name=baseline, baseline=opts.rows / results["stdlib"][1], higher_is_better=True)  # fmt: skip
    nan = body.replace(b'"priceWithDisc": ', b'"priceWithDisc": "NaN", "x": ', 1)
    for label, data in (("clean", body), ("one NaN", nan)):
        plain, _ = harness.best_of(opts.repeat, lambda data=data: parse_msgspec(data))
        screened_s, rows = harness.best_of(opts.repeat, lambda data=data: parse_screened(data))
        if len(rows) != opts.rows - (data is nan):
            raise RuntimeError("the screened decode kept the wrong rows: no figures")
        bench.figure(f"parse {opts.rows // 1000}k orders judging every row ({label} body)", opts.rows / screened_s,
                     "rows/s", baseline_name="msgspec decode, no judging", baseline=opts.rows / plain,
                     higher_is_better=True)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
