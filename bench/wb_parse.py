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

    python bench/wb_parse.py [--rows 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import msgspec

from optima_pipelines.wb import Order


def make_body(rows: int, seed: int = 1) -> bytes:
    """WB's orders feed as WB sends it: camelCase, naive Moscow timestamps, money as JSON numbers."""
    rng = random.Random(seed)
    start = datetime(2026, 5, 1)
    items = []
    for i in range(rows):
        date = start + timedelta(seconds=i * 37 + rng.randrange(30))
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
    ("total_price", "totalPrice", _MONEY, True),
    ("discount_percent", "discountPercent", _INT, True),
    ("spp", "spp", _MONEY, True),
    ("finished_price", "finishedPrice", _MONEY, True),
    ("price_with_disc", "priceWithDisc", _MONEY, True),
    ("is_cancel", "isCancel", _BOOL, True),
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
                values[attr] = None
                continue
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


def to_copy_rows(rows: list[Order]) -> list[tuple[Any, ...]]:
    return [r.copy_row() for r in rows]


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    body = make_body(args.rows)
    print(f"{args.rows} WB orders, {len(body) / 1e6:.1f} MB of JSON; best of {args.repeat} runs each\n")

    results = {}
    for name, parse in (("stdlib json + manual", parse_stdlib), ("msgspec (client)", parse_msgspec)):
        parse_s, _ = best_of(args.repeat, lambda parse=parse: parse(body))
        total_s, copy_rows = best_of(args.repeat, lambda parse=parse: to_copy_rows(parse(body)))
        results[name] = (parse_s, total_s, copy_rows)

    baseline_rows = results["stdlib json + manual"][2]
    if baseline_rows != results["msgspec (client)"][2]:
        print("the two parsers disagree: no figures", file=sys.stderr)
        return 1

    base_parse, base_total, _ = results["stdlib json + manual"]
    print(f"{'parser':<22} {'to rows s':>10} {'rows/s':>12} {'x':>6}   {'to COPY s':>10} {'rows/s':>12} {'x':>6}")
    for name, (parse_s, total_s, _) in results.items():
        print(
            f"{name:<22} {parse_s:>10.3f} {args.rows / parse_s:>12,.0f} {base_parse / parse_s:>6.1f}"
            f"   {total_s:>10.3f} {args.rows / total_s:>12,.0f} {base_total / total_s:>6.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
