"""What the models of every WB API section share: Moscow time, and the row that is a warehouse table's."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, TypeVar

import msgspec

from optima_pipelines.timeutil import MOSCOW


def to_moscow(dt: datetime) -> datetime:
    """A WB timestamp in Moscow time: a naive one is Moscow wall time, an aware one is converted.
    A time no calendar holds in Moscow (year 9999 at UTC-5) is a ValueError: decoding refuses its row."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=MOSCOW)
    try:
        return dt.astimezone(MOSCOW)
    except OverflowError:
        raise ValueError(f"{dt.isoformat()} is out of range") from None


def to_moscow_or_none(dt: datetime | None) -> datetime | None:
    """Like ``to_moscow``; WB's ``0001-01-01T00:00:00`` "no date" is None."""
    if dt is None or dt.year == 1:
        return None
    return to_moscow(dt)


class Row(msgspec.Struct, kw_only=True, gc=False):
    """A WB row that maps onto a warehouse table: COLUMNS are the struct's fields (their names are
    the table's columns) followed by ``DERIVED`` columns computed by ``derived()``.

    Screening (``wb.screening``): a model with ``REFUSABLE`` is a row, refused on its own when a
    value of it is bad (every ``Row`` is); ``WHEN`` are its times that must not be in the future
    (the row is flagged, and never a cursor); ``ROW_KEY`` the fields that name it to an operator."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    DERIVED: ClassVar[tuple[str, ...]] = ()
    REFUSABLE: ClassVar[bool] = True
    WHEN: ClassVar[tuple[str, ...]] = ()
    ROW_KEY: ClassVar[tuple[str, ...]] = ()

    def derived(self) -> tuple[Any, ...]:
        return ()

    def copy_row(self) -> tuple[Any, ...]:
        """Values in ``COLUMNS`` order."""
        return (*msgspec.structs.astuple(self), *self.derived())


R = TypeVar("R", bound=type[Row])


def table(cls: R) -> R:
    """Sets ``COLUMNS`` once msgspec has built the struct's fields."""
    cls.COLUMNS = (*cls.__struct_fields__, *cls.DERIVED)
    return cls
