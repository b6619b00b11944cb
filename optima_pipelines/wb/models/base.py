"""What the models of every WB API section share: Moscow time, and the row that is a warehouse table's."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, TypeVar

import msgspec

from optima_pipelines.timeutil import MOSCOW


def to_moscow(dt: datetime) -> datetime:
    """A WB timestamp in Moscow time: a naive one is Moscow wall time, an aware one is converted."""
    return dt.replace(tzinfo=MOSCOW) if dt.tzinfo is None else dt.astimezone(MOSCOW)


def to_moscow_or_none(dt: datetime | None) -> datetime | None:
    """Like ``to_moscow``; WB's ``0001-01-01T00:00:00`` "no date" is None."""
    if dt is None or dt.year == 1:
        return None
    return to_moscow(dt)


class Row(msgspec.Struct, kw_only=True, gc=False):
    """A WB row that maps onto a warehouse table: COLUMNS are the struct's fields (their names are
    the table's columns) followed by ``DERIVED`` columns computed by ``derived()``."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    DERIVED: ClassVar[tuple[str, ...]] = ()

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
