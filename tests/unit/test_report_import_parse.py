"""Parsing the seller portal's realization report: headers old and new, cells as WB writes them, errors by row."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest
from openpyxl import Workbook

from optima_pipelines.errors import InvalidInput
from optima_pipelines.sync.report_file import IMPORT_COLUMNS, REPORT_COLUMNS, parse_report_file
from optima_pipelines.timeutil import MOSCOW

#: The required columns, under the names of an older export (ё-less, other wording).
OLD_HEADERS = [
    "Код номенклатуры",
    "Тип документа",
    "Обоснование для оплаты",
    "Дата продажи",
    "Кол-во",
    "Вайлдберриз реализовал Товар (Пр)",
    "К перечислению Продавцу за реализованный Товар",
    "Количество доставок",
    "Количество возврата",
    "Услуги по доставке товара покупателю",
    "Общая сумма штрафов",
    "Srid",
    "Хранение",
    "Удержания",
    "Платная приемка",
    "Размер  кВВ без НДС, % Базовый",
]


def row(nm=101, doc="Продажа", oper="Продажа", sold="2026-05-01", qty=1, amount=367.5, pay="300,25", srid="s1"):
    return [nm, doc, oper, sold, qty, amount, pay, 1, 0, 0, 0, srid, 0, 0, 0, "12,5"]


def sheet(tmp_path, rows, headers=OLD_HEADERS, title_rows=0, name="report.xlsx"):
    book = Workbook()
    ws = book.active
    for i in range(title_rows):
        ws.append([f"Детализация отчёта реализации № {i}"])
    ws.append(headers)
    for r in rows:
        ws.append(r)
    path = tmp_path / name
    book.save(path)
    return path


def value(report, i: int, column: str):
    return report.rows[i][IMPORT_COLUMNS.index(column)]


def test_old_headers_title_rows_and_blank_lines_are_understood(tmp_path):
    path = sheet(
        tmp_path,
        [row(), [None] * len(OLD_HEADERS), row(nm=0, doc="", oper="Хранение", sold="02.05.2026")],
        title_rows=2,
    )
    report = parse_report_file(path)
    assert report.header_row == 3 and report.row_numbers == [4, 6]
    assert value(report, 0, "retail_amount") == Decimal("367.5")
    assert value(report, 0, "for_pay") == Decimal("300.25")
    assert value(report, 0, "kvw_base") == Decimal("12.5")
    assert value(report, 0, "sale_dt") == datetime(2026, 5, 1, tzinfo=MOSCOW)
    assert value(report, 1, "day") == date(2026, 5, 2)
    assert value(report, 1, "paid_acceptance") == Decimal(0)
    assert report.nm_ids == {101: 4}


def test_current_headers_are_wbs_own_names():
    # Every column's first header is the name WB's finance API documents for the field.
    names = {c.headers[0] for c in REPORT_COLUMNS}
    assert {"Операции на приёмке", "Платформенные скидки, %", "Способ продажи и тип товара"} <= names


@pytest.mark.parametrize(
    "change, message",
    [
        ({"amount": "12.3.4"}, "row 3: «Вайлдберриз реализовал Товар (Пр)» '12.3.4' is not a number"),
        ({"qty": 1.5}, "row 3: «Кол-во» 1.5 is not a whole number"),
        ({"sold": "32.13.2026"}, "row 3: «Дата продажи» '32.13.2026' is not a date"),
        ({"oper": None}, "row 3: «Обоснование для оплаты» is empty"),
        ({"sold": None}, "row 3: «Дата продажи» is empty"),
    ],
)
def test_a_bad_cell_names_its_row_and_column(tmp_path, change, message):
    with pytest.raises(InvalidInput) as error:
        parse_report_file(sheet(tmp_path, [row(), row(**change)]))
    assert message in str(error.value)


def test_columns_given_twice_are_refused(tmp_path):
    headers = [*OLD_HEADERS, "Операции на приёмке"]  # «Платная приемка» under its new name too
    with pytest.raises(InvalidInput, match="has these columns twice: «Операции на приёмке»"):
        parse_report_file(sheet(tmp_path, [[*row(), 0]], headers=headers))


def test_csv_with_semicolons_decimal_commas_and_windows_1251(tmp_path):
    lines = [";".join(OLD_HEADERS), ";".join(str(v) for v in row(amount="1 234,56"))]
    path = tmp_path / "report.csv"
    path.write_bytes("\n".join(lines).encode("cp1251"))
    report = parse_report_file(path)
    assert value(report, 0, "retail_amount") == Decimal("1234.56")
    assert value(report, 0, "srid") == "s1"
