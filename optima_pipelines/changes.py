"""The change record: what one feed's load changed on one Moscow day of one cabinet ("these rows of
this feed changed"), as a run records it in Dagster.

The syncs produce ``FeedChange``s (``sync.runs.FeedLoad.changes``); a run records each as the
materialization of the feed's `cabinet|day` partition with ``to_metadata()``
(orchestration/materializations.py): what the UI shows of a load, under the keys of
docs/ARCHITECTURE.md (``rows_*``, ``rows_left``: rows re-dated away from the day, ``trigger``,
``request_id``). A user's import hands its records to the recompute in its own run, which takes
their cabinets. What the РНП recomputes is not read from here: the feeds' triggers keep the
watermarks the planner reads (mart/plan.py), whoever writes.

The lowest layer of the package (docs/ARCHITECTURE.md): it imports nothing of it, so the syncs, the
mart and the orchestration all can import it. Nothing here imports Dagster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any


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

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON values (ints and strings). The feed, cabinet and day are the materialization's
        asset key and partition."""
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
        return meta


def iso_days(days: Iterable[date]) -> list[str]:
    return sorted(d.isoformat() for d in set(days))
