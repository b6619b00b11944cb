"""Realization reports as the WB seller portal exports them («Детализация отчёта реализации»), built from
the simulator's lines, for the user report import tests.

The headers and their order are the portal's (2025 export); each is paired here, independently of
optima_pipelines' own mapping, with the finance API field WB documents under the same Russian name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from optima_pipelines.timeutil import MOSCOW

#: The portal export's header → the finance API field (None: the row number).
PORTAL_COLUMNS: list[tuple[str, str | None]] = [
    ("№", None),
    ("Номер поставки", "giId"),
    ("Предмет", "subjectName"),
    ("Код номенклатуры", "nmId"),
    ("Бренд", "brandName"),
    ("Артикул поставщика", "vendorCode"),
    ("Название", "title"),
    ("Размер", "techSize"),
    ("Баркод", "sku"),
    ("Тип документа", "docTypeName"),
    ("Обоснование для оплаты", "sellerOperName"),
    ("Дата заказа покупателем", "orderDt"),
    ("Дата продажи", "saleDt"),
    ("Кол-во", "quantity"),
    ("Цена розничная", "retailPrice"),
    ("Вайлдберриз реализовал Товар (Пр)", "retailAmount"),
    ("Согласованный продуктовый дисконт, %", "salePercent"),
    ("Промокод, %", "sellerPromo"),
    ("Итоговая согласованная скидка, %", "productDiscountForReport"),
    ("Цена розничная с учетом согласованной скидки", "retailPriceWithDisc"),
    ("Размер снижения кВВ из-за рейтинга, %", "supRatingUp"),
    ("Размер изменения кВВ из-за акции, %", "isKgvpV2"),
    ("Скидка постоянного Покупателя (СПП), %", "spp"),
    ("Размер кВВ, %", "commissionPercent"),
    ("Размер  кВВ без НДС, % Базовый", "kvwBase"),
    ("Итоговый кВВ без НДС, %", "kvw"),
    ("Вознаграждение с продаж до вычета услуг поверенного, без НДС", "ppvzSalesCommission"),
    ("Возмещение за выдачу и возврат товаров на ПВЗ", "ppvzReward"),
    ("Эквайринг/Комиссии за организацию платежей", "acquiringFee"),
    ("Размер комиссии за эквайринг/Комиссии за организацию платежей, %", "acquiringPercent"),
    ("Тип платежа за Эквайринг/Комиссии за организацию платежей", "paymentProcessing"),
    ("Вознаграждение Вайлдберриз (ВВ), без НДС", "vw"),
    ("НДС с Вознаграждения Вайлдберриз", "vwNds"),
    ("К перечислению Продавцу за реализованный Товар", "forPay"),
    ("Количество доставок", "deliveryAmount"),
    ("Количество возврата", "returnAmount"),
    ("Услуги по доставке товара покупателю", "deliveryService"),
    ("Дата начала действия фиксации", "fixTariffDateFrom"),
    ("Дата конца действия фиксации", "fixTariffDateTo"),
    ("Признак услуги платной доставки", "srvDbs"),
    ("Общая сумма штрафов", "penalty"),
    ("Корректировка Вознаграждения Вайлдберриз (ВВ)", "additionalPayment"),
    ("Виды логистики, штрафов и корректировок ВВ", "bonusTypeName"),
    ("Стикер МП", "stickerId"),
    ("Наименование банка-эквайера", "acquiringBank"),
    ("Номер офиса", "ppvzOfficeId"),
    ("Наименование офиса доставки", "ppvzOfficeName"),
    ("ИНН партнера", "ppvzSupplierInn"),
    ("Партнер", "ppvzSupplierName"),
    ("Склад", "officeName"),
    ("Страна", "country"),
    ("Тип коробов", "giBoxTypeName"),
    ("Номер таможенной декларации", "declarationNumber"),
    ("Номер сборочного задания", "orderId"),
    ("Код маркировки", "kiz"),
    ("ШК", "shkId"),
    ("Srid", "srid"),
    ("Возмещение издержек по перевозке/по складским операциям с товаром", "rebillLogisticCost"),
    ("Организатор перевозки", "rebillLogisticOrg"),
    ("Хранение", "paidStorage"),
    ("Удержания", "deduction"),
    ("Платная приемка", "paidAcceptance"),
    ("Фиксированный коэффициент склада по поставке", "dlvPrc"),
    ("Признак продажи юридическому лицу", "isB2b"),
    ("Номер короба для платной приемки", "trbxId"),
    ("Скидка по программе софинансирования", "installmentCofinancingAmount"),
    ("Скидка Wibes, %", "wibesDiscountPercent"),
    ("Сумма удержанная за начисленные баллы программы лояльности", "cashbackAmount"),
    ("Компенсация скидки по программе лояльности", "cashbackDiscount"),
]
#: Fields the portal shows as money or numbers (WB's API sends money as strings).
NUMERIC = {
    "retailPrice",
    "retailAmount",
    "retailPriceWithDisc",
    "ppvzSalesCommission",
    "ppvzReward",
    "acquiringFee",
    "vw",
    "vwNds",
    "forPay",
    "deliveryService",
    "penalty",
    "additionalPayment",
    "rebillLogisticCost",
    "paidStorage",
    "deduction",
    "paidAcceptance",
    "installmentCofinancingAmount",
    "cashbackAmount",
    "cashbackDiscount",
    "sellerPromo",
}


def moscow_day(value: str) -> date:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(MOSCOW).date()


def portal_value(line: dict[str, Any], field: str, number: int) -> Any:
    if field is None:
        return number
    value = line.get(field)
    if field in ("orderDt", "saleDt"):
        return moscow_day(value)  # the portal shows dates; the sheet stores date cells
    if field in NUMERIC:
        return float(Decimal(str(value)))  # the sheet stores numbers as doubles
    if isinstance(value, bool):
        return "да" if value else "нет"
    return value


def write_xlsx(
    path: Path,
    lines: Iterable[dict[str, Any]],
    *,
    columns: list[tuple[str, str | None]] = PORTAL_COLUMNS,
    sheet: str = "Sheet1",
    edit: Callable[[int, list[Any]], None] | None = None,
) -> Path:
    """An xlsx like the portal's: one sheet, headers on row 1, one line per row from row 2.
    ``edit(sheet_row, values)`` may change a row before it is written."""
    book = Workbook(write_only=True)
    ws = book.create_sheet(sheet)
    ws.append([h for h, _ in columns])
    for i, line in enumerate(lines, start=1):
        values = [portal_value(line, f, i) for _, f in columns]  # type: ignore[arg-type]
        if edit is not None:
            edit(i + 1, values)
        ws.append(values)
    book.save(path)
    return path


def write_csv(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    """A csv as a spreadsheet saves it in a Russian locale: ';' between fields, decimal commas."""
    out = [";".join(h for h, _ in PORTAL_COLUMNS)]
    for i, line in enumerate(lines, start=1):
        cells = []
        for _, f in PORTAL_COLUMNS:
            v = portal_value(line, f, i)  # type: ignore[arg-type]
            text = "" if v is None else (f"{v:.2f}".replace(".", ",") if isinstance(v, float) else str(v))
            cells.append(text.replace(";", " "))
        out.append(";".join(cells))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path
