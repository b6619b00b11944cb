"""A realization report a user downloaded from WB's seller portal («Детализация отчёта реализации»):
the xlsx or csv file read, parsed and checked completely, before anything is written.

Russian headers map onto ``wb_report_lines`` columns (``REPORT_COLUMNS``); a bad cell, a wrong
sheet, missing columns write nothing and fail with an ``InvalidInput`` naming the row. Writing the
parsed report, and checking that it is the cabinet's, is ``sync/finance.py``'s.
"""

from __future__ import annotations

import csv
import os
import re
import stat
import unicodedata
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from optima_pipelines.errors import InvalidInput
from optima_pipelines.timeutil import MOSCOW, as_moscow


@dataclass(frozen=True)
class ReportColumn:
    """A column of the portal's export: the table column it fills, how to read it, its headers.

    ``headers[0]`` is the name WB's finance API documents for the field (13-finances.yaml), which
    current exports use; the others are names older exports used."""

    column: str
    kind: str  # int | money | number | text | datetime | date | bool
    headers: tuple[str, ...]
    required: bool = False


def _c(column: str, kind: str, *headers: str, required: bool = False) -> ReportColumn:
    return ReportColumn(column, kind, headers, required)


#: The portal export's headers → wb_report_lines. Required: what a line's money and identity need.
REPORT_COLUMNS: tuple[ReportColumn, ...] = (
    _c("gi_id", "int", "Номер поставки", "ID поставки"),
    _c("subject_name", "text", "Предмет"),
    _c("nm_id", "int", "Код номенклатуры", "Артикул WB", required=True),
    _c("brand_name", "text", "Бренд"),
    _c("vendor_code", "text", "Артикул поставщика", "Артикул продавца"),
    _c("title", "text", "Название", "Название товара"),
    _c("tech_size", "text", "Размер"),
    _c("sku", "text", "Баркод"),
    _c("doc_type_name", "text", "Тип документа", required=True),
    _c("seller_oper_name", "text", "Обоснование для оплаты", required=True),
    _c("order_dt", "datetime", "Дата заказа покупателем", "Дата и время заказа"),
    _c("sale_dt", "datetime", "Дата продажи", "Дата и время продажи", required=True),
    _c("rr_date", "date", "Дата операции"),
    _c("quantity", "int", "Кол-во", "Количество", required=True),
    _c("retail_price", "money", "Цена розничная"),
    _c("retail_amount", "money", "Вайлдберриз реализовал Товар (Пр)", required=True),
    _c("sale_percent", "number", "Согласованный продуктовый дисконт, %"),
    _c("seller_promo", "number", "Промокод, %", "Промокод %"),
    _c("product_discount_for_report", "number", "Итоговая согласованная скидка, %"),
    _c("retail_price_with_disc", "money", "Цена розничная с учётом согласованной скидки"),
    _c("sup_rating_up", "number", "Размер снижения кВВ из-за рейтинга, %"),
    _c("is_kgvp_v2", "number", "Размер снижения кВВ из-за акции, %", "Размер изменения кВВ из-за акции, %"),
    _c("spp", "number", "Платформенные скидки, %", "Скидка постоянного Покупателя (СПП), %"),
    _c("commission_percent", "number", "Размер кВВ, %"),
    _c("kvw_base", "number", "Размер кВВ без НДС, % базовый"),
    _c("kvw", "number", "Итоговый кВВ без НДС, %"),
    _c("ppvz_sales_commission", "money", "Вознаграждение с продаж до вычета услуг поверенного, без НДС"),
    _c("ppvz_reward", "money", "Возмещение за выдачу и возврат товаров на ПВЗ"),
    _c(
        "acquiring_fee",
        "money",
        "Компенсация платёжных услуг/Комиссия за интеграцию платёжных сервисов",
        "Эквайринг/Комиссии за организацию платежей",
        "Возмещение расходов по эквайрингу",
    ),
    _c(
        "acquiring_percent",
        "number",
        "Размер компенсации платёжных услуг/Комиссии за интеграцию платёжных сервисов, %",
        "Размер комиссии за эквайринг/Комиссии за организацию платежей, %",
    ),
    _c(
        "payment_processing",
        "text",
        "Тип платежа: компенсация платёжных услуг/Комиссия за интеграцию платёжных сервисов",
        "Тип платежа за Эквайринг/Комиссии за организацию платежей",
    ),
    _c("vw", "money", "Вознаграждение Вайлдберриз (ВВ), без НДС"),
    _c("vw_nds", "money", "НДС с вознаграждения Вайлдберриз"),
    _c("for_pay", "money", "К перечислению продавцу за реализованный товар", required=True),
    _c("delivery_amount", "int", "Количество доставок", required=True),
    _c("return_amount", "int", "Количество возврата", "Количество возвратов", required=True),
    _c("delivery_service", "money", "Услуги по доставке товара покупателю", required=True),
    _c("srv_dbs", "bool", "Признак услуги платной доставки"),
    _c("penalty", "money", "Общая сумма штрафов", required=True),
    _c("additional_payment", "money", "Корректировка Вознаграждения Вайлдберриз (ВВ)", "Доплаты"),
    _c("bonus_type_name", "text", "Виды логистики, штрафов и корректировок ВВ", "Виды логистики, штрафов и доплат"),
    _c("sticker_id", "text", "Стикер МП"),
    _c("acquiring_bank", "text", "Наименование банка-эквайера"),
    _c("ppvz_office_id", "int", "ID офиса доставки", "Номер офиса"),
    _c("ppvz_office_name", "text", "Наименование офиса доставки"),
    _c("ppvz_supplier_inn", "text", "ИНН партнёра"),
    _c("ppvz_supplier_name", "text", "Партнёр"),
    _c("office_name", "text", "Склад"),
    _c("country", "text", "Страна продажи", "Страна"),
    _c("gi_box_type_name", "text", "Тип коробов"),
    _c("declaration_number", "text", "Номер таможенной декларации"),
    _c("order_id", "int", "ID сборочного задания", "Номер сборочного задания"),
    _c("kiz", "text", "Код маркировки"),
    _c("shk_id", "int", "Штрихкод", "ШК"),
    _c("srid", "text", "Srid", required=True),
    _c("rebill_logistic_cost", "money", "Возмещение издержек по перевозке/по складским операциям с товаром"),
    _c("rebill_logistic_org", "text", "Организатор перевозки"),
    _c("paid_storage", "money", "Хранение", required=True),
    _c("deduction", "money", "Удержания", "Прочие удержания", required=True),
    _c("paid_acceptance", "money", "Операции на приёмке", "Платная приёмка", required=True),
    _c("is_b2b", "bool", "Признак B2B-продажи", "Признак продажи юридическому лицу"),
    _c(
        "trbx_id",
        "text",
        "ID короба для обработки товара",
        "Номер короба для обработки товара",
        "Номер короба для платной приемки",
    ),
    _c("installment_cofinancing_amount", "money", "Скидка по программе софинансирования"),
    _c("wibes_discount_percent", "number", "Скидка Wibes, %"),
    _c(
        "cashback_amount",
        "money",
        "Сумма, удержанная за начисленные баллы программы лояльности",
        "Сумма удержанная за начисленные баллы программы лояльности",
        "Сумма баллов, удержанных по программе лояльности",
    ),
    _c("cashback_discount", "money", "Компенсация скидки по программе лояльности"),
    _c("cashback_commission_change", "money", "Стоимость участия в программе лояльности"),
    _c("payment_schedule", "money", "Разовое изменение срока перечисления денежных средств"),
    _c("delivery_method", "text", "Способ продажи и тип товара", "Способы продажи и тип товара"),
    _c("order_uid", "text", "ID корзины заказа"),
)

#: Columns of an uploaded line: the cabinet, its own day, then every mapped column.
IMPORT_COLUMNS = ("cabinet_id", "day", *(c.column for c in REPORT_COLUMNS))
#: Headers of the export that are known and deliberately not stored (no column for them).
IGNORED_HEADERS = (
    "№",
    "Дата начала действия фиксации",
    "Дата конца действия фиксации",
    "Фиксированный коэффициент склада по поставке",
    "Коэффициент логистики",
)
#: How many rows from the top of a sheet may come before its header row (titles, blank rows).
HEADER_SEARCH_ROWS = 10
#: A sheet whose header row has this many of the report's headers is the report.
REPORT_SIGNATURE = 3
FORMATS = ("xlsx", "csv")


def normalize_header(text: Any) -> str:
    """Case, ё/е, non-breaking and repeated spaces do not distinguish headers."""
    value = unicodedata.normalize("NFKC", str(text)).replace("\u00a0", " ").casefold().replace("ё", "е")
    return " ".join(value.split())


_HEADERS: dict[str, ReportColumn] = {normalize_header(h): c for c in REPORT_COLUMNS for h in c.headers}


@dataclass
class ParsedReport:
    """An uploaded report, parsed and checked: rows in ``IMPORT_COLUMNS`` order (cabinet_id None)."""

    path: Path
    sheet: str | None
    header_row: int  # 1-based, as a spreadsheet shows it
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    #: The sheet row number of each row, for error messages.
    row_numbers: list[int] = field(default_factory=list)
    unknown_headers: list[str] = field(default_factory=list)

    @property
    def nm_ids(self) -> dict[int, int]:
        """Product id → the first sheet row that names it (0: lines of no product)."""
        index = IMPORT_COLUMNS.index("nm_id")
        first: dict[int, int] = {}
        for row, number in zip(self.rows, self.row_numbers, strict=True):
            nm = row[index]
            if nm and nm not in first:
                first[nm] = number
        return first


def upload_path(upload_dir: Path, name: str) -> Path:
    """The uploaded report ``name`` names, which must be a regular file in ``upload_dir``
    (OPTIMA_UPLOAD_DIR): a request never makes the run open another path (``secret.key``,
    ``/proc/self/environ``), whether by an absolute path, ``..`` or a symlink that leads out.
    A relative name is taken in the upload folder. InvalidInput names what is wrong."""
    folder = Path(os.path.realpath(upload_dir))
    given = Path(name.strip())
    shown = repr(name if len(name) <= 200 else f"{name[:80]}…{name[-40:]}")
    if "\0" in name:
        raise InvalidInput("the report's path holds a NUL character")
    target = Path(os.path.realpath(given if given.is_absolute() else folder / given))
    if not target.is_relative_to(folder) or target == folder:
        raise InvalidInput(
            f"report file {shown} is not in the upload folder {folder} (OPTIMA_UPLOAD_DIR): reports are "
            "read from there only"
        )
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        raise InvalidInput(f"report file {shown} does not exist") from None
    except OSError as exc:
        raise InvalidInput(f"report file {shown} cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise InvalidInput(f"report file {shown} is not a regular file")
    return target


def report_format(path: str | Path, declared: str | None) -> str:
    if declared is not None:
        if declared not in FORMATS:
            raise InvalidInput(f"format {declared!r} is not supported: expected xlsx or csv")
        return declared
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise InvalidInput(f"cannot tell the format of {Path(path).name!r}: name it .xlsx or .csv, or give format")
    return suffix


def _read_sheets(path: Path, fmt: str) -> list[tuple[str | None, Any]]:
    """Every sheet of the file as a DataFrame of raw cells (no header, objects), or InvalidInput."""
    import pandas as pd  # here, not at the top: every process that loads the code location would pay for it
    from python_calamine import CalamineError

    shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:200]}…"
    try:
        is_file = path.is_file()
    except OSError as exc:  # a name too long, a loop of links: bad input, not a trouble to retry
        raise InvalidInput(
            f"the report file {shown!r} cannot be read ({exc.__class__.__name__}: [Errno {exc.errno}] {exc.strerror})"
        ) from None
    if not is_file:
        raise InvalidInput(f"the report file {shown!r} does not exist or is not a file")
    if fmt == "xlsx":
        try:
            # calamine (Rust) reads a workbook ~10 times faster than openpyxl, with the same cell types.
            sheets = pd.read_excel(path, sheet_name=None, header=None, dtype=object, engine="calamine")
        except (CalamineError, zipfile.BadZipFile, KeyError, ValueError, OSError, TypeError) as exc:
            raise InvalidInput(
                f"{path.name} is not a readable xlsx workbook ({exc.__class__.__name__}: {exc})"
            ) from None
        return list(sheets.items())
    for encoding in ("utf-8-sig", "cp1251"):
        try:
            # The head only: decoding the whole file here held a second copy of it in memory (a
            # 500 MB upload took over 1 GB before pandas read it again).
            with path.open(encoding=encoding) as text:
                head = text.read(65536)
        except UnicodeDecodeError:
            continue
        try:
            frame = pd.read_csv(
                path,
                sep=_csv_separator(head),
                header=None,
                dtype=str,
                keep_default_na=False,
                skip_blank_lines=False,
                encoding=encoding,
            )
        except UnicodeDecodeError:
            continue  # not this encoding after all, past the head
        except (pd.errors.ParserError, csv.Error, ValueError, OSError) as exc:
            raise InvalidInput(f"{path.name} is not a readable csv file ({exc.__class__.__name__}: {exc})") from None
        return [(None, frame)]
    raise InvalidInput(f"{path.name} is neither UTF-8 nor Windows-1251 text")


def _csv_separator(head: str) -> str:
    """The separator that splits the first lines into the most report headers (headers hold commas,
    so a generic sniffer guesses wrong); ';' when none does."""
    lines = [line for line in head.splitlines()[:HEADER_SEARCH_ROWS] if line.strip()]

    def known(sep: str) -> int:
        return max(
            (sum(normalize_header(f) in _HEADERS for f in next(csv.reader([ln], delimiter=sep))) for ln in lines),
            default=0,
        )

    return max((";", "\t", ","), key=known)


def _blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and value != value:  # NaN: pandas' empty cell
        return True
    return isinstance(value, str) and not value.strip()


def _find_header(frame: Any) -> tuple[int, dict[int, ReportColumn]] | None:
    """The header row (0-based) and the report columns by position, if the sheet is the report."""
    for i in range(min(HEADER_SEARCH_ROWS, len(frame))):
        found = {
            j: _HEADERS[normalize_header(v)]
            for j, v in enumerate(frame.iloc[i].tolist())
            if not _blank(v) and normalize_header(v) in _HEADERS
        }
        if len(found) >= REPORT_SIGNATURE:
            return i, found
    return None


def parse_report_file(path: str | Path, fmt: str | None = None) -> ParsedReport:
    """Parse and check an uploaded realization report completely; InvalidInput names the first problem.

    The report is the first sheet whose header row (within its first rows) carries the report's
    headers; every required column must be there; every cell must read as its column's kind.
    """
    path = Path(path)
    fmt = report_format(path, fmt)
    sheets = _read_sheets(path, fmt)
    for name, frame in sheets:
        found = _find_header(frame)
        if found is None:
            continue
        header_index, columns = found
        seen = {c.column for c in columns.values()}
        missing = [c.headers[0] for c in REPORT_COLUMNS if c.required and c.column not in seen]
        where = f"sheet {name!r}" if name is not None else path.name
        if missing:
            raise InvalidInput(
                f"{where} of {path.name} lacks required columns: {', '.join(f'«{h}»' for h in missing)} "
                f"(header row {header_index + 1})"
            )
        dupes = [c.headers[0] for c, n in Counter(columns.values()).items() if n > 1]
        if dupes:
            raise InvalidInput(f"{where} of {path.name} has these columns twice: {', '.join(f'«{h}»' for h in dupes)}")
        report = ParsedReport(path, name, header_index + 1)
        ignored = {normalize_header(h) for h in IGNORED_HEADERS}
        report.unknown_headers = [
            str(v).strip()
            for j, v in enumerate(frame.iloc[header_index].tolist())
            if not _blank(v) and j not in columns and normalize_header(v) not in ignored
        ]
        _parse_rows(report, frame, header_index, columns)
        if not report.rows:
            raise InvalidInput(f"{where} of {path.name} has the report's headers but no lines")
        return report
    names = ", ".join(repr(n) for n, _ in sheets if n is not None)
    expected = ", ".join(f"«{c.headers[0]}»" for c in REPORT_COLUMNS if c.required)
    raise InvalidInput(
        f"no sheet of {path.name} holds a realization report{f' (sheets: {names})' if names else ''}: "
        f"expected a header row with {expected}"
    )


def _parse_rows(report: ParsedReport, frame: Any, header_index: int, columns: dict[int, ReportColumn]) -> None:
    positions = {c.column: j for j, c in columns.items()}
    order = [(positions.get(c.column), c) for c in REPORT_COLUMNS]
    values = frame.to_numpy(dtype=object)
    for i in range(header_index + 1, len(values)):
        cells = values[i]
        if all(_blank(cells[j]) for j in positions.values()):
            continue
        number = i + 1
        parsed = [_cell(cells[j] if j is not None else None, column, number) for j, column in order]
        record = dict(zip((c.column for _, c in order), parsed, strict=True))
        if not record["seller_oper_name"]:
            raise InvalidInput(f"row {number}: «{header('seller_oper_name')}» is empty")
        day = _line_day(record, number)
        report.rows.append((None, day, *parsed))
        report.row_numbers.append(number)


def header(column: str) -> str:
    return next(c.headers[0] for c in REPORT_COLUMNS if c.column == column)


def _line_day(record: dict[str, Any], number: int) -> date:
    if record["rr_date"] is not None:
        return record["rr_date"]
    if record["sale_dt"] is not None:
        return record["sale_dt"].date()
    raise InvalidInput(f"row {number}: «{header('sale_dt')}» is empty: a line needs its date")


_NUMBER_RE = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?$")
_ZERO_DEFAULT = {"int", "money"}
_TRUE = {"да", "true", "1", "yes", "истина"}
_FALSE = {"нет", "false", "0", "no", "ложь"}
_DATE_FORMATS = (
    "%Y-%m-%d",
    "%d.%m.%Y",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M",
)


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        # A sheet stores a double; its shortest repr is the number WB wrote (367.5, not 367.4999...).
        return Decimal(repr(value)) if value == value and abs(value) != float("inf") else None
    if isinstance(value, Decimal):
        return value
    text = str(value).replace("\u00a0", "").replace(" ", "").strip()
    if not _NUMBER_RE.match(text):
        return None
    try:
        return Decimal(text.replace(",", "."))
    except InvalidOperation:
        return None


def _cell(value: Any, column: ReportColumn, number: int) -> Any:
    """One cell as its column's type; InvalidInput names the row, the column and the value."""
    if _blank(value):
        if column.kind in _ZERO_DEFAULT and column.required:
            return 0 if column.kind == "int" else Decimal(0)
        return None
    kind = column.kind

    def bad(what: str) -> InvalidInput:
        return InvalidInput(f"row {number}: «{column.headers[0]}» {value!r} is not {what}")

    if kind in ("money", "number"):
        d = _decimal(value)
        if d is None:
            raise bad("a number")
        return d
    if kind == "int":
        d = _decimal(value)
        if d is None or d != d.to_integral_value():
            raise bad("a whole number")
        return int(d)
    if kind == "text":
        if isinstance(value, float) and value.is_integer():
            return str(int(value))  # barcodes and ids typed as numbers by the sheet
        return str(value).strip()
    if kind == "bool":
        text = str(value).strip().casefold()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad("yes/no")
    moment = _moment(value)
    if moment is None:
        raise bad("a date")
    return moment.date() if kind == "date" else moment


def _moment(value: Any) -> datetime | None:
    """A cell as an aware Moscow datetime: dates and naive times are Moscow's (WB's own)."""
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        return as_moscow(value)
    if isinstance(value, date):
        return datetime.combine(value, time.min, tzinfo=MOSCOW)
    text = str(value).strip()
    try:
        return as_moscow(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        pass
    for pattern in _DATE_FORMATS:
        try:
            return as_moscow(datetime.strptime(text, pattern))
        except ValueError:
            continue
    return None
