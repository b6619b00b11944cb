"""WB's disorder: what real WB does that a tidy simulator would not, each mode on its own or all together.

``CabinetSpec(disorder=Disorder(late_orders=0.3, ...))`` turns modes on for a cabinet; every mode is
off (0) by default, and a cabinet without ``disorder`` is exactly the tidy world (the modes draw from
random streams of their own, seeded from the simulator's seed, the cabinet and the day, so the rest
of the world is the same with or without them, and the same seed gives the same disorder).

Modes (rates between 0 and 1):

- ``late_orders``: share of orders the orders feed delivers 6 hours to 4 days after they were placed
  (their first ``lastChangeDate``); their sales rows and report lines may come first, so a report
  line can reference an order the statistics feed has not delivered yet;
- ``late_cancellations``: share of cancellations that come 8 days to 5 weeks after the order;
- ``foreign_returns``: share of days with a return (``R…`` in the sales feed, a «Возврат» and a
  logistics line in the report) of an order placed 95 to 150 days before, outside every window
  the orders feed serves (WB keeps 90 days): its ``srid`` matches no order a client can know;
- ``service_lines``: share of days with a penalty and a logistics correction on ``nmId`` 0 that
  reference an order by ``srid`` (WB's lines for a shipment rather than a product);
- ``short_pages``: share of finance report pages cut shorter than the request's ``limit`` although
  more lines follow (WB's contract is "request the next page until 204"); 204 only at the very end;
- ``repeated_lines``: share of follow-on finance pages (``rrdId`` > 0) that start with the previous
  page's last line again (the same line on two pages);
- ``page_failures``: share of follow-on finance pages (earlier pages of the same load succeeded)
  that fail: a 5xx, or a 200 whose JSON is cut in half.
- ``revised_ad_days``: share of (campaign, day)s whose statistics WB revises 1 to 47 hours after the
  day ended (while the day is still in an ad sync's window): the figures of every app move under
  the site's (appType 1) and the other apps' rows are gone from the answer, so a client that only
  upserts keeps them twice;
- ``redated_orders``: share of orders WB re-dates 1 to 12 hours after they reached the feed: the same
  ``srid`` comes back with its ``date`` one day earlier and a newer ``lastChangeDate``;
- ``redated_sales``: the same for sales (``S…``): the same ``saleID`` one day earlier, a newer
  ``lastChangeDate``.

``ledger.pages.served`` holds the ``rrdId`` of every line the finance method delivered in an intact
page: what a client that stores each page before the next request must have stored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from wb_simulator.faults import server_error_body

if TYPE_CHECKING:
    from wb_simulator.finance import Line

#: The orders feed delivers a late order this long after it was placed, at most (seconds).
LATE_ORDER_MIN = 6 * 3600
LATE_ORDER_MAX = 4 * 86400
#: A late cancellation comes this long after the order (seconds).
LATE_CANCEL_MIN = 8 * 86400
LATE_CANCEL_MAX = 35 * 86400
#: A foreign return's order was placed this many days before the return.
FOREIGN_ORDER_DAYS = (95, 150)
#: A revised ad day is revised this long after the day ended (seconds).
REVISE_AD_MIN = 3600
REVISE_AD_MAX = 47 * 3600
#: A re-dated order (sale) is re-dated this long after it reached the feed (seconds), one day earlier.
REDATE_MIN = 3600
REDATE_MAX = 12 * 3600


@dataclass(frozen=True)
class Disorder:
    """Rates of WB's disorder modes for one cabinet (see the module docstring)."""

    late_orders: float = 0.0
    late_cancellations: float = 0.0
    foreign_returns: float = 0.0
    service_lines: float = 0.0
    short_pages: float = 0.0
    repeated_lines: float = 0.0
    page_failures: float = 0.0
    revised_ad_days: float = 0.0
    redated_orders: float = 0.0
    redated_sales: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"Disorder.{f.name} must be a rate between 0 and 1, got {value!r}")

    @classmethod
    def modes(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def only(cls, mode: str, rate: float = 0.3) -> Disorder:
        """One mode on its own."""
        if mode not in cls.modes():
            raise ValueError(f"unknown disorder mode {mode!r}; known: {', '.join(cls.modes())}")
        return cls(**{mode: rate})

    @classmethod
    def every(cls, rate: float = 0.3) -> Disorder:
        """Every mode at once."""
        return cls(**dict.fromkeys(cls.modes(), rate))


@dataclass
class Page:
    """What the finance method answers to one request: lines, or a failure (status and raw body)."""

    lines: list[Line]
    status: int = 200
    body: dict[str, object] | None = None
    truncate: bool = False


class PageDisorder:
    """The finance report's paging disorder of one cabinet: a seeded stream of decisions, one set per
    request, and the lines delivered in intact pages."""

    def __init__(self, disorder: Disorder, seed: int, cabinet_id: str):
        self.disorder = disorder
        self.rng = random.Random(f"{seed}:disorder-pages:{cabinet_id}")
        self.served: set[int] = set()

    def shape(self, lines: list[Line], previous: Line | None, follow_on: bool) -> Page:
        """The page for ``lines`` (what a tidy WB would send, rrdId > the request's, up to its
        limit); ``previous`` is the line the request's rrdId names (the previous page's last) when it
        is in the requested range; ``follow_on`` whether earlier pages of this load came first."""
        d, rng = self.disorder, self.rng
        if follow_on and rng.random() < d.page_failures:
            if rng.random() < 0.5:
                status = rng.choice((500, 502, 503, 504))
                return Page([], status, server_error_body(status))
            return Page(lines, truncate=True)
        if len(lines) > 1 and rng.random() < d.short_pages:
            lines = lines[: rng.randint(1, len(lines) - 1)]
        if lines and previous is not None and follow_on and rng.random() < d.repeated_lines:
            lines = [previous, *lines]
        self.served.update(line.rrd_id for line in lines)
        return Page(lines)
