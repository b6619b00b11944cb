"""The change record: what one feed's load changed on one Moscow day of one cabinet, the one fact
that travels from the syncs to the РНП planner ("these days of this feed changed").

The syncs produce ``FeedChange``s (``sync.runs.FeedLoad.changes``); a run records each as the
materialization of the feed's `cabinet|day` partition with ``to_metadata()``
(orchestration/materializations.py); the re-aggregation sensor reads it back with
``from_metadata``, which raises InvalidInput naming what is wrong (the sensor skips such an event
with a warning); the planner (mart/plan.py) takes the records. A user's import hands its records to
the recompute in its own run as they are (``assets.rnp.recompute_in_run``), never through metadata.
This module is the only place that serializes it. The keys are docs/ARCHITECTURE.md's:
``rows_*`` (``rows_left``: rows re-dated away from the day), ``trigger``, ``request_id``, ``affected_days``, ``finance_days``.

The lowest layer of the package (docs/ARCHITECTURE.md): it imports nothing of it but errors, so the
syncs, the mart and the orchestration all can import it. Nothing here imports Dagster: a metadata
value that wraps its value (Dagster's ``MetadataValue``) is read through its ``value``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from optima_pipelines.errors import InvalidInput


@dataclass(frozen=True)
class FeedChange:
    """Rows of one feed (its table / asset) changed on one Moscow day of one cabinet: the partition
    ``cabinet_id|day``. ``day`` None: the whole load of a cabinet-partitioned snapshot (cards, prices)."""

    feed: str
    cabinet_id: str
    day: date | None
    rows_fetched: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    #: Rows that moved from this day to another (WB re-dated them): the day lost them.
    rows_left: int = 0
    #: scheduled | user_import | backfill | manual (``sync.runs.TRIGGERS``); None: not said.
    trigger: str | None = None
    request_id: int | None = None
    #: Days whose РНП rollup must be recomputed besides the partition's own (the finance report:
    #: the days of the changed lines' source orders).
    affected_days: tuple[date, ...] = ()
    #: wb_orders: days that report lines of the partition's new (or re-dated) orders leave for it.
    finance_days: tuple[date, ...] = ()

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON values: ints, strings, lists of ISO dates (empty day lists are left out). The
        feed, cabinet and day are the materialization's asset key and partition."""
        meta: dict[str, Any] = {
            "rows_fetched": self.rows_fetched,
            "rows_inserted": self.rows_inserted,
            "rows_updated": self.rows_updated,
            "rows_deleted": self.rows_deleted,
            "rows_left": self.rows_left,
        }
        if self.trigger is not None:
            meta["trigger"] = self.trigger
        if self.request_id is not None:
            meta["request_id"] = self.request_id
        if self.affected_days:
            meta["affected_days"] = iso_days(self.affected_days)
        if self.finance_days:
            meta["finance_days"] = iso_days(self.finance_days)
        return meta

    @classmethod
    def from_metadata(cls, feed: str, cabinet_id: str, day: date | None, metadata: Mapping[str, Any]) -> FeedChange:
        """The record of a materialization of ``feed``'s partition (``cabinet_id``, ``day``)."""

        def number(key: str) -> int:
            value = _raw(metadata.get(key, 0))
            return value if isinstance(value, int) else 0

        trigger = _raw(metadata.get("trigger"))
        request_id = _raw(metadata.get("request_id"))
        return cls(
            feed=feed,
            cabinet_id=cabinet_id,
            day=day,
            rows_fetched=number("rows_fetched"),
            rows_inserted=number("rows_inserted"),
            rows_updated=number("rows_updated"),
            rows_deleted=number("rows_deleted"),
            rows_left=number("rows_left"),
            trigger=str(trigger) if trigger is not None else None,
            request_id=request_id if isinstance(request_id, int) else None,
            affected_days=_days(metadata["affected_days"], "affected_days") if "affected_days" in metadata else (),
            finance_days=_days(metadata["finance_days"], "finance_days") if "finance_days" in metadata else (),
        )


def iso_days(days: Iterable[date]) -> list[str]:
    return sorted(d.isoformat() for d in set(days))


def _raw(value: Any) -> Any:
    return getattr(value, "value", value)


def _days(value: Any, key: str) -> tuple[date, ...]:
    """A JSON list of ISO dates (as JSON or as its text) → sorted distinct dates."""
    raw = _raw(value)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise InvalidInput(f"{key} {raw[:80]!r} is not a JSON list of ISO dates") from None
    if not isinstance(raw, list):
        raise InvalidInput(f"{key} must be a list of ISO dates, got {type(raw).__name__}")
    days = []
    for item in raw:
        try:
            days.append(date.fromisoformat(str(item)))
        except ValueError:
            raise InvalidInput(f"{key} contains {item!r}, which is not an ISO date (YYYY-MM-DD)") from None
    return tuple(sorted(set(days)))
