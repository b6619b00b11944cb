"""Bad values from WB, screened row by row before anything is stored (docs/data.md, "Bad values from WB").

WB's answers are decoded into the typed models (``wb/models``); a **row** is a model marked
``REFUSABLE`` (every ``base.Row``: orders, sales, report lines, stocks; and cards, prices, funnel
products, ad statistics' days and products, campaigns, news). Each row is judged on its own:

- **refused** (not stored, recorded with the reason and WB's raw row): a value msgspec cannot
  decode (a missing key, a wrong type, a date no calendar has); an amount that is NaN, ±Infinity or
  out of range (|x| ≥ 10^15); an integer beyond PostgreSQL's bigint; a date before 2000 or after
  2100 (WB's "not deleted" campaign date is 2100-01-01);
- **flagged** (stored as WB sent it, recorded): a row whose time (``WHEN``: a statistics row's
  ``lastChangeDate``, a card's ``updatedAt``...) is later than now plus ``FUTURE_ALLOWANCE``. Such a
  time is never a cursor: the statistics feeds page and save their cursor from the rows of the
  present only.

The other rows of the page are decoded and stored as usual. ``Transport.decode_rows`` applies this to
every answer that holds rows; the client hands the verdicts on with each page (``Page.screening``)
and the loads record them (``sync.runs.record_screening`` → table ``wb_rejected_rows``).

A decode error outside any row (the envelope, a listing's cursor) still fails the page: nothing in
it can be trusted.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import inspect as mi

T = TypeVar("T")

#: How far past now a row's time may be before it is "from the future" (WB's clock and ours).
FUTURE_ALLOWANCE = timedelta(hours=1)
#: Amounts (money, percentages) at or beyond this magnitude are not WB's figures.
MAX_AMOUNT = Decimal(10) ** 15
#: PostgreSQL's bigint, the widest integer column of the warehouse.
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
#: Dates outside [EARLIEST, LATEST] are refused.
EARLIEST = date(2000, 1, 1)
LATEST = date(2100, 12, 31)
#: The raw row kept with a refusal, at most (characters).
RAW_LIMIT = 8000
#: A page whose rows fail to decode in more places than this is broken as a whole.
MAX_BROKEN_LISTS = 200

_RAW_ENCODER = msgspec.json.Encoder(decimal_format="number")
_TREE_DECODER = msgspec.json.Decoder(float_hook=Decimal)


@dataclass(frozen=True)
class Verdict:
    """One row WB sent that a load must not take blindly: ``refused`` (not stored) or ``flagged``
    (stored). ``field`` is WB's name of the value at fault, ``key`` the row's key (``srid=…``) when
    it could be read, ``raw`` the row as WB sent it (JSON)."""

    outcome: str
    reason: str
    raw: str
    field: str | None = None
    key: str | None = None
    #: The WB method that sent it (``GET statistics /api/v1/supplier/orders``).
    endpoint: str = ""


@dataclass
class Screening:
    """What one WB answer (or several, for a call that joins answers) held besides good rows."""

    refused: list[Verdict] = field(default_factory=list)
    flagged: list[Verdict] = field(default_factory=list)
    #: The rows (decoded objects) that were flagged: stored, but never a cursor.
    flagged_rows: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.refused or self.flagged)

    def add(self, other: Screening) -> None:
        self.refused += other.refused
        self.flagged += other.flagged
        self.flagged_rows |= other.flagged_rows

    def is_flagged(self, row: object) -> bool:
        return id(row) in self.flagged_rows


class Page(list[T], Generic[T]):
    """One WB page of rows that passed, with the ``screening`` of those that did not."""

    def __init__(self, rows: Iterable[T] = (), screening: Screening | None = None):
        super().__init__(rows)
        self.screening = screening or Screening()

    def present(self) -> list[T]:
        """The rows whose time is not in the future: the only ones a cursor may come from."""
        if not self.screening.flagged_rows:
            return list(self)
        return [r for r in self if not self.screening.is_flagged(r)]


# -- what each model's values are ---------------------------------------------------------------

_DECIMAL, _INT, _DATE, _DATETIME, _STRUCT, _LIST = range(6)


def refusable(cls: Any) -> bool:
    return isinstance(cls, type) and bool(getattr(cls, "REFUSABLE", False))


def _unwrap(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.UnionType):
        others = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(others) == 1:
            return others[0]
    return t


_PLANS: dict[type, tuple[tuple[str, str, int, Any], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, str, int, Any], ...]:
    """(attribute, WB's name, kind, nested struct class) of each field worth a look."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


_CONTAINERS: dict[type, tuple[tuple[str, str, int, Any], ...]] = {}
_TIMES: dict[type, tuple[tuple[str, str, int], ...]] = {}


def _containers(cls: type) -> tuple[tuple[str, str, int, Any], ...]:
    """The fields of ``_plan(cls)`` that hold structs: where nested rows may be."""
    found = _CONTAINERS.get(cls)
    if found is None:
        found = _CONTAINERS[cls] = tuple(p for p in _plan(cls) if p[2] in (_STRUCT, _LIST))
    return found


def _times(cls: type) -> tuple[tuple[str, str, int], ...]:
    """(attribute, WB's name, kind) of the row's ``WHEN`` times."""
    found = _TIMES.get(cls)
    if found is None:
        when = getattr(cls, "WHEN", ())
        found = _TIMES[cls] = tuple((a, n, k) for a, n, k, _ in _plan(cls) if a in when)
    return found


def _make_plan(cls: type) -> tuple[tuple[str, str, int, Any], ...]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    plan: list[tuple[str, str, int, Any]] = []
    for f in info.fields:
        t = _unwrap(f.type)
        if isinstance(t, mi.DecimalType):
            plan.append((f.name, f.encode_name, _DECIMAL, None))
        elif isinstance(t, mi.IntType):
            plan.append((f.name, f.encode_name, _INT, None))
        elif isinstance(t, mi.DateTimeType):
            plan.append((f.name, f.encode_name, _DATETIME, None))
        elif isinstance(t, mi.DateType):
            plan.append((f.name, f.encode_name, _DATE, None))
        elif isinstance(t, mi.StructType):
            plan.append((f.name, f.encode_name, _STRUCT, t.cls))
        elif isinstance(t, mi.ListType) and isinstance(_unwrap(t.item_type), mi.StructType):
            plan.append((f.name, f.encode_name, _LIST, _unwrap(t.item_type).cls))  # type: ignore[attr-defined]
    return tuple(plan)


_CHECKERS: dict[type, Callable[[Any], object]] = {}


def _checker(cls: type) -> Callable[[Any], object]:
    """A function of one struct of ``cls`` that returns something truthy when a value of it (nested
    structs included, nested rows aside) breaks a rule: generated once per class, because judging
    every row of every answer field by field in a loop cost as much as decoding it (bench/wb_parse.py).
    ``value_problem`` then says which value and why."""
    found = _CHECKERS.get(cls)
    if found is not None:
        return found
    namespace: dict[str, Any] = {"checker": _checker}
    lines = ["def check(o):"]
    for n, (attr, _, kind, sub) in enumerate(_plan(cls)):
        lines.append(f"    v = o.{attr}")
        if kind == _DECIMAL:  # adjusted() < 15: |v| < 10^15; a zero with a large exponent is still zero
            lines.append("    if v is not None and not (v.is_finite() and (v.adjusted() < 15 or not v)): return v")
        elif kind == _INT:
            lines.append(f"    if v is not None and not ({MIN_INT} <= v <= {MAX_INT}): return v")
        elif kind in (_DATE, _DATETIME):
            lines.append(f"    if v is not None and not ({EARLIEST.year} <= v.year <= {LATEST.year}): return v")
        elif kind == _STRUCT:
            namespace[f"sub{n}"] = sub
            lines.append(f"    if v is not None and checker(sub{n})(v) is not None: return v")
        elif kind == _LIST and not refusable(sub):
            namespace[f"sub{n}"] = sub
            lines.append("    if v is not None:")
            lines.append(f"        c = checker(sub{n})")
            lines.append("        for item in v:")
            lines.append("            if c(item) is not None: return item")
    lines.append("    return None")
    exec(compile("\n".join(lines), f"<screening check of {cls.__qualname__}>", "exec"), namespace)
    found = _CHECKERS[cls] = namespace["check"]
    return found


def value_problem(kind: int, value: Any) -> str | None:
    """Why a decoded value cannot be stored, or None."""
    if kind == _DECIMAL:
        if not value.is_finite():
            return f"{value} is not a number"
        if abs(value) >= MAX_AMOUNT:
            return f"{value} is out of range (|x| ≥ 10^15)"
    elif kind == _INT:
        if not MIN_INT <= value <= MAX_INT:
            return f"{value} is out of range (beyond a 64-bit integer)"
    elif kind in (_DATE, _DATETIME):
        day = value.date() if kind == _DATETIME else value
        if not EARLIEST <= day <= LATEST:
            return f"{value.isoformat()} is out of range ({EARLIEST} to {LATEST})"
    return None


def _is_future(kind: int, value: Any, limit: datetime) -> bool:
    if kind == _DATETIME:
        return value > limit if value.tzinfo is not None else value > limit.replace(tzinfo=None)
    return bool(kind == _DATE and value > limit.date())


class _Judge:
    """Walks a decoded answer: refuses rows with values that cannot be stored, flags rows from the future."""

    def __init__(self, now: datetime):
        self.limit = now + FUTURE_ALLOWANCE
        self.refused: list[tuple[tuple[Any, ...], str, str]] = []  # (row path, field, reason)
        self.flagged: list[tuple[tuple[Any, ...], object, str, str]] = []

    def walk(self, obj: Any, path: tuple[Any, ...]) -> None:
        for attr, name, kind, sub in _containers(type(obj)):
            value = getattr(obj, attr)
            if value is None:
                continue
            if kind == _STRUCT:
                self.walk(value, (*path, name))
            elif kind == _LIST:
                self.walk_list(value, (*path, name), sub)

    def walk_list(self, items: list[Any], path: tuple[Any, ...], cls: type) -> None:
        if not refusable(cls):
            for i, item in enumerate(items):
                self.walk(item, (*path, i))
            return
        keep = []
        for i, item in enumerate(items):
            where = (*path, i)
            problem = self.row_problem(item, where)
            if problem is not None:
                self.refused.append((where, *problem))
                continue
            self.walk(item, where)
            keep.append(item)
        if len(keep) != len(items):
            items[:] = keep

    def row_problem(self, row: Any, where: tuple[Any, ...]) -> tuple[str, str] | None:
        """(field, reason) of the first value of ``row`` (nested rows aside) that cannot be stored;
        flags the row when one of its ``WHEN`` times is in the future."""
        if _checker(type(row))(row) is not None:  # the fast check found something: say what
            problem = self._values(row, where)
            if problem is not None:
                return problem
        for attr, name, kind in _times(type(row)):
            value = getattr(row, attr)
            if value is not None and _is_future(kind, value, self.limit):
                self.flagged.append((where, row, name, f"{name} {value.isoformat()} is in the future"))
                break
        return None

    def _values(self, obj: Any, where: tuple[Any, ...]) -> tuple[str, str] | None:
        for attr, name, kind, sub in _plan(type(obj)):
            value = getattr(obj, attr)
            if value is None:
                continue
            problem: tuple[str, str] | None = None
            if kind == _STRUCT:
                problem = self._values(value, where)
            elif kind == _LIST:
                if not refusable(sub):  # nested rows are judged on their own
                    for item in value:
                        problem = self._values(item, where)
                        if problem is not None:
                            break
            else:
                reason = value_problem(kind, value)
                problem = (name, f"{name} {reason}") if reason is not None else None
            if problem is not None:
                return problem
        return None


# -- decoding an answer row by row ---------------------------------------------------------------

_PATH_TOKEN = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _parse_path(path: str) -> list[str | int]:
    """``$[3].days[0].nmId`` → [3, "days", 0, "nmId"]."""
    return [int(i) if i else name for name, i in _PATH_TOKEN.findall(path.removeprefix("$"))]


def _row_list_on(model: Any, tokens: list[str | int]) -> tuple[int, type] | None:
    """Along the error's path: the position (in ``tokens``) of the index into the deepest list of
    rows, and the row class."""
    t: mi.Type = mi.type_info(model)
    found = None
    for n, token in enumerate(tokens):
        t = _unwrap(t)
        if isinstance(token, int):
            if not isinstance(t, mi.ListType):
                return found
            t = _unwrap(t.item_type)
            if isinstance(t, mi.StructType) and refusable(t.cls):
                found = (n, t.cls)
        elif isinstance(t, mi.StructType):
            by_name = {f.encode_name: f for f in t.fields}
            if token not in by_name:
                return found
            t = by_name[token].type
        else:
            return found
    return found


def _at(tree: Any, tokens: Iterable[str | int]) -> Any:
    for token in tokens:
        tree = tree[token]
    return tree


def raw_text(value: Any) -> str:
    text = _RAW_ENCODER.encode(value).decode()
    return text if len(text) <= RAW_LIMIT else text[: RAW_LIMIT - 1] + "…"


def row_key(cls: type, raw: Any) -> str | None:
    """``srid=…`` (the model's ``KEYS`` that identify a row, as WB names them) when readable in ``raw``."""
    if not isinstance(raw, dict):
        return None
    names = {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
    wanted = [n for n in getattr(cls, "ROW_KEY", ()) if n in names]
    parts = [f"{names[n]}={raw[names[n]]}" for n in wanted if raw.get(names[n]) not in (None, "")]
    return ", ".join(parts) or None


def _field_of(message: str) -> tuple[str, str | None]:
    """msgspec's "Expected `int`, got `str` - at `$.nmId`" → (problem, "nmId")."""
    problem, sep, where = message.rpartition(" - at `")
    if not sep:
        problem, where = message, ""
    missing = re.match(r"Object missing required field `([^`]+)`", problem)
    if missing:
        return f"required field {missing.group(1)!r} is missing", missing.group(1)
    tokens = _parse_path(where.rstrip("`"))
    name = next((t for t in reversed(tokens) if isinstance(t, str)), None)
    return problem, name


def _refuse_unreadable(tree: Any, model: Any, error: str, refused: list[Verdict]) -> bool:
    """Drop from ``tree`` every row of the list the decode ``error`` points into that does not
    decode on its own; False when the error is not inside a row."""
    tokens = _parse_path(error.rpartition(" - at `")[2].rstrip("`")) if " - at `" in error else []
    found = _row_list_on(model, tokens)
    if found is None:
        return False
    n, cls = found
    try:
        items = _at(tree, tokens[:n])
    except (KeyError, IndexError, TypeError):
        return False
    if not isinstance(items, list):
        return False
    keep = []
    for item in items:
        try:
            msgspec.convert(item, cls)
        except msgspec.ValidationError as exc:
            problem, name = _field_of(str(exc))
            reason = f"{name}: {problem}" if name and not problem.startswith("required field") else problem
            refused.append(Verdict("refused", reason, raw_text(item), name, row_key(cls, item)))
            continue
        keep.append(item)
    if len(keep) == len(items):
        return False  # the element failed only as part of the page: not this list's fault
    items[:] = keep
    return True


def decode_rows(
    content: bytes, model: type[T], now: datetime, fail: Callable[[str, str | None], Exception], endpoint: str = ""
) -> tuple[T, Screening]:
    """Decode WB's answer (from ``endpoint``) into ``model``, judging each row on its own (the module's rules).

    ``fail(problem, field_path)`` builds the error raised when the answer is broken outside its rows."""
    screening = Screening()
    tree: Any = None
    try:
        decoded = msgspec.json.decode(content, type=model)
    except msgspec.ValidationError as exc:
        try:
            tree = _TREE_DECODER.decode(content)
        except msgspec.DecodeError:
            raise exc from None
        error = str(exc)
        for _ in range(MAX_BROKEN_LISTS):
            if not _refuse_unreadable(tree, model, error, screening.refused):
                raise exc from None
            try:
                decoded = msgspec.convert(tree, model)
                break
            except msgspec.ValidationError as again:
                error = str(again)
        else:
            raise fail(f"rows fail to decode in more than {MAX_BROKEN_LISTS} places", None) from None
    judge = _Judge(now)
    if isinstance(decoded, list):
        item = _unwrap(mi.type_info(model)).item_type  # type: ignore[attr-defined]
        item = _unwrap(item)
        if isinstance(item, mi.StructType):
            judge.walk_list(decoded, (), item.cls)
    elif isinstance(decoded, msgspec.Struct):
        judge.walk(decoded, ())
    if judge.refused or judge.flagged:
        if tree is None:
            tree = _TREE_DECODER.decode(content)
        for where, name, reason in judge.refused:
            raw = _at(tree, where)
            screening.refused.append(Verdict("refused", reason, raw_text(raw), name, _key_at(model, where, raw)))
        for where, row, name, reason in judge.flagged:
            raw = _at(tree, where)
            screening.flagged.append(Verdict("flagged", reason, raw_text(raw), name, _key_at(model, where, raw)))
            screening.flagged_rows.add(id(row))
    if endpoint:
        screening.refused = [dataclasses.replace(v, endpoint=endpoint) for v in screening.refused]
        screening.flagged = [dataclasses.replace(v, endpoint=endpoint) for v in screening.flagged]
    return decoded, screening


def _key_at(model: Any, where: tuple[Any, ...], raw: Any) -> str | None:
    found = _row_list_on(model, list(where))
    return row_key(found[1], raw) if found else None
