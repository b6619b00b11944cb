"""The simulator object: cabinets, clock, tokens, limits, faults, writes, and the truth."""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from wb_simulator import rows, views
from wb_simulator.common import News, Slots
from wb_simulator.faults import Faults
from wb_simulator.finance import Ledger, line_amounts
from wb_simulator.inbox import Inbox
from wb_simulator.limits import LIMIT_GROUPS, Limiter, LimiterClock
from wb_simulator.pricing import PriceBook
from wb_simulator.timefmt import DAY, MSK, date_to_dn, day_number, day_start, now_ts, to_ts
from wb_simulator.tokens import CATEGORY_BITS, TOKEN_LIFETIME_SECONDS, TokenAuthority
from wb_simulator.world import Cabinet, CabinetSpec, Order

#: Rows of the statistics feeds are kept this long after the order (WB: 90 days).
RETENTION_DAYS = 90


@dataclass(frozen=True)
class Write:
    """A write the simulator received and applied: ``kind`` is ``bids``, ``price_task``,
    ``feedback_answer``, ``feedback_answer_edit`` or ``question``."""

    kind: str
    cabinet_id: str
    at: datetime
    payload: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)


class UnknownCabinet(KeyError):
    def __str__(self) -> str:
        return f"unknown cabinet {self.args[0]!r}"


@dataclass(frozen=True)
class Call:
    """One request the gateway served with a valid token: whose, what, and when (real Unix seconds)."""

    cabinet_id: str
    method: str
    target: str
    started: float
    ended: float


class Journal:
    """The last ``size`` calls the gateway served, per cabinet: what tests read to see who asked WB
    what and when (e.g. that two runs never talked to WB for one cabinet at once)."""

    def __init__(self, size: int = 100_000):
        self._calls: deque[Call] = deque(maxlen=size)
        self._lock = threading.Lock()

    def record(self, cabinet_id: str, method: str, target: str, started: float, ended: float) -> None:
        with self._lock:
            self._calls.append(Call(cabinet_id, method, target, started, ended))

    def calls(self, cabinet_id: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if cabinet_id is None or c.cabinet_id == cabinet_id]


class Simulator:
    """A seeded, internally consistent WB for a few cabinets. See the package docstring."""

    def __init__(
        self,
        seed: int = 1,
        cabinets: list[CabinetSpec] | None = None,
        time_scale: float = 1.0,
        now: datetime | None = None,
    ):
        self.seed = seed
        self.lock = threading.RLock()
        # An explicit ``now`` pins the clock (only advance() moves it): the same seed and now give
        # the same answers to the same requests. Without it, simulated time follows real time.
        start = float(to_ts(now)) if now is not None else now_ts()
        self._frozen: float | None = start if now is not None else None
        self._offset = 0.0
        specs = cabinets if cabinets is not None else [CabinetSpec(id="c1")]
        ids = [s.id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"cabinet ids must be unique, got {ids}")
        t0 = int(start)
        self.cabinets: dict[str, Cabinet] = {}
        self.ledgers: dict[str, Ledger] = {}
        self.inboxes: dict[str, Inbox] = {}
        self.price_books: dict[str, PriceBook] = {}
        for spec in specs:
            self._add(spec, t0)
        first_dn = min((c.first_dn for c in self.cabinets.values()), default=day_number(t0) - 30)
        self.news = News(seed, first_dn)
        self.slots = Slots(seed)
        self.tokens = TokenAuthority(hashlib.sha256(f"wb-sim:{seed}".encode()).digest())
        self.limiter = Limiter(LimiterClock(time_scale))
        self.faults = Faults(seed)
        self.journal = Journal()
        #: At most this many lines a page of the finance report, whatever the request's limit (None: the
        #: limit). WB documents no fixed page size, only "request the next page until 204": a page
        #: shorter than the limit need not be the last.
        self.finance_page_cap: int | None = None
        self.writes: list[Write] = []
        self.truth = Truth(self)
        self._request_seq = itertools.count(1)

    def _add(self, spec: CabinetSpec, t0: int) -> Cabinet:
        i = len(self.cabinets)
        cab = Cabinet(spec, i, self.seed, day_number(t0) - spec.history_days)
        cab.ensure(t0)
        self.cabinets[spec.id] = cab
        self.ledgers[spec.id] = Ledger(cab)
        self.inboxes[spec.id] = Inbox(cab, t0)
        self.price_books[spec.id] = PriceBook(cab, first_id=(i + 1) * 1_000_000)
        return cab

    def add_cabinet(self, spec: CabinetSpec) -> None:
        """A cabinet more, its history generated up to simulated now (a simulator that serves
        several tests in turn gives each its own cabinets); ValueError if the id is taken."""
        with self.lock:
            if spec.id in self.cabinets:
                raise ValueError(f"cabinet {spec.id!r} already exists")
            if len(self.cabinets) >= 256:
                raise ValueError("a simulator holds at most 256 cabinets (order ids carry the index)")
            self._add(spec, self.now_ts())

    # -- clock -----------------------------------------------------------------------------------

    @property
    def time_scale(self) -> float:
        return self.limiter.clock.time_scale

    def now_ts(self) -> int:
        return int(self._frozen if self._frozen is not None else now_ts() + self._offset)

    def now(self) -> datetime:
        """Simulated now, as an aware Moscow datetime."""
        return datetime.fromtimestamp(self.now_ts(), MSK)

    def today(self) -> date:
        return self.now().date()

    def advance(self, delta: timedelta) -> datetime:
        """Move simulated time forward; what was due in between happens (orders, cancellations,
        sales, returns, report lines, feedbacks, slot changes). Returns the new now."""
        if delta < timedelta(0):
            raise ValueError(f"time only moves forward; got {delta}")
        with self.lock:
            if self._frozen is not None:
                self._frozen += delta.total_seconds()
            else:
                self._offset += delta.total_seconds()
            self.sync()
            return self.now()

    def sync(self) -> int:
        """Generate everything due by now; returns now (Unix seconds). Callers hold the lock."""
        t = self.now_ts()
        for cab in self.cabinets.values():
            cab.ensure(t)
        return t

    def retention_from(self, t: int) -> int:
        return t - RETENTION_DAYS * DAY

    def cabinet(self, cabinet_id: str) -> Cabinet:
        try:
            return self.cabinets[cabinet_id]
        except KeyError:
            raise UnknownCabinet(cabinet_id) from None

    def next_request_id(self) -> str:
        # Not under self.lock: the gateway answers 401/404/429 without waiting for a running method.
        seq = next(self._request_seq)
        return hashlib.md5(f"{self.seed}:{seq}".encode(), usedforsecurity=False).hexdigest()

    # -- tokens, limits --------------------------------------------------------------------------

    def token(
        self,
        cabinet_id: str,
        categories: list[str] | tuple[str, ...] | None = None,
        token_type: str = "personal",
        expired: bool = False,
        read_only: bool = False,
    ) -> str:
        """A token for the cabinet: every category by default (``categories`` restricts it);
        ``token_type`` personal, service, base or test; ``expired`` gives one that expired a day ago."""
        cab = self.cabinet(cabinet_id)
        t = self.now_ts()
        exp = t - DAY if expired else t + TOKEN_LIFETIME_SECONDS
        return self.tokens.issue(
            cab.id, cab.sid, categories=categories, token_type=token_type, exp=exp, read_only=read_only
        )

    def revoke(self, token: str) -> None:
        """Make a token invalid from now on (WB: a token deleted in the seller's portal)."""
        self.tokens.revoke(token)

    def penalize(self, cabinet_id: str, limit_group_or_category: str, seconds: float) -> None:
        """Every call of that limit group (e.g. ``statistics.orders``) or whole category (``advert``)
        answers 429 with the remaining pause in ``X-Ratelimit-Retry`` for ``seconds`` simulated
        seconds (real seconds / time_scale)."""
        known = set(LIMIT_GROUPS) | set(CATEGORY_BITS) | {"common"}
        if limit_group_or_category not in known:
            raise ValueError(f"unknown limit group or category {limit_group_or_category!r}; known: {sorted(known)}")
        self.limiter.penalize(self.cabinet(cabinet_id).sid, limit_group_or_category, seconds)

    # -- direct mutators for tests -----------------------------------------------------------------

    def _order(self, cabinet_id: str, srid: str) -> tuple[Cabinet, Order]:
        cab = self.cabinet(cabinet_id)
        o = cab.by_srid.get(srid)
        if o is None or o.date > self.now_ts():
            raise KeyError(f"cabinet {cabinet_id!r} has no order with srid {srid!r}")
        return cab, o

    def cancel_order(self, cabinet_id: str, srid: str) -> dict[str, Any]:
        """Cancel an order now; its lastChangeDate becomes now. Returns the order row."""
        with self.lock:
            t = self.sync()
            cab, o = self._order(cabinet_id, srid)
            cab.cancel(o, t)
            return rows.order_row(o, max(t, o.cancel_at or t))

    def return_sale(self, cabinet_id: str, srid: str) -> dict[str, Any]:
        """The buyer returns a bought-out order now: a new ``R…`` row in the sales feed. Returns it."""
        with self.lock:
            t = self.sync()
            cab, o = self._order(cabinet_id, srid)
            cab.return_(o, t)
            return rows.sale_row(o, 1)

    def place_order(
        self, cabinet_id: str, nm_id: int, at: datetime, price: Decimal | int | str, sale_at: datetime | None = None
    ) -> str:
        """A hand-made order: one unit of product ``nm_id`` placed at ``at`` (naive: Moscow), in the
        feed a minute later, ``price`` rubles (priceWithDisc; no discount, no SPP), bought out at
        ``sale_at`` (None: never). Orders are placed in time order (a cabinet with
        ``orders_per_day=0`` has none of its own). Returns its srid."""
        with self.lock:
            t = self.sync()
            cab = self.cabinet(cabinet_id)
            if nm_id not in cab.by_nm:
                raise KeyError(f"cabinet {cabinet_id!r} has no product {nm_id}")
            placed, sold = to_ts(at), (to_ts(sale_at) if sale_at is not None else None)
            if max(placed, sold or placed) > t:
                raise ValueError("an order and its sale are placed in the past, not after the simulator's now")
            return cab.place(cab.by_nm[nm_id], placed, views.kopecks(price), sold).srid

    def redate_order(self, cabinet_id: str, srid: str, new_date: datetime) -> dict[str, Any]:
        """WB re-dates an order now: the same srid, ``date`` ``new_date``, a newer lastChangeDate.
        Returns the order row."""
        with self.lock:
            t = self.sync()
            cab, o = self._order(cabinet_id, srid)
            cab.redate(o, to_ts(new_date), t)
            return rows.order_row(o, max(t, o.moved_at or t))

    def redate_sale(self, cabinet_id: str, srid: str, new_date: datetime) -> dict[str, Any]:
        """WB re-dates an order's sale (``S…``) now: the same saleID, ``date`` ``new_date``, a newer
        lastChangeDate. Returns the sale row."""
        with self.lock:
            t = self.sync()
            cab, o = self._order(cabinet_id, srid)
            cab.redate_sale(o, to_ts(new_date), t)
            return rows.sale_row(o, 0, max(t, o.sale_moved_at or t))

    def set_ad_day(self, cabinet_id: str, advert_id: int, day: date, stats: list[dict[str, Any]]) -> None:
        """From now on fullstats answers ``stats`` for the campaign's ``day``, whatever it said before:
        rows {appType, nmId, views, clicks, atbs, orders, sum, sum_price} (money in rubles). The
        campaign must be one WB serves statistics for, active that day."""
        with self.lock:
            self.sync()
            cab = self.cabinet(cabinet_id)
            c = cab.campaign(advert_id)
            dn = date_to_dn(day)
            if c is None or not views.campaign_active(c, dn):
                raise ValueError(f"campaign {advert_id} of {cabinet_id!r} has no statistics on {day}")
            cab.ad_overrides[(advert_id, dn)] = views.ad_day_item(dn, stats)
            cab.forget(dn)

    def add_feedback(self, cabinet_id: str, nm_id: int, text: str = "Хороший товар", valuation: int = 5) -> str:
        """A new unanswered feedback on a product, now; returns its id."""
        if not 1 <= valuation <= 5:
            raise ValueError(f"valuation must be 1..5, got {valuation}")
        with self.lock:
            t = self.sync()
            cab = self.cabinet(cabinet_id)
            if nm_id not in cab.by_nm:
                raise KeyError(f"cabinet {cabinet_id!r} has no product {nm_id}")
            return self.inboxes[cabinet_id].add_feedback(cab.by_nm[nm_id], t, text, valuation).id

    def add_question(self, cabinet_id: str, nm_id: int, text: str = "Есть ли другие размеры?") -> str:
        """A new unanswered question on a product, now; returns its id."""
        with self.lock:
            t = self.sync()
            cab = self.cabinet(cabinet_id)
            if nm_id not in cab.by_nm:
                raise KeyError(f"cabinet {cabinet_id!r} has no product {nm_id}")
            return self.inboxes[cabinet_id].add_question(cab.by_nm[nm_id], t, text).id

    def open_slot(
        self,
        warehouse_id: int,
        day: date,
        coefficient: int = 0,
        box_type_id: int | None = None,
        allow_unload: bool = True,
    ) -> None:
        """Set a warehouse's acceptance coefficient for a day (every box type unless one is given)."""
        with self.lock:
            self.slots.open(warehouse_id, day, coefficient, box_type_id, allow_unload)

    def set_coefficients_disabled(self, disabled: bool = True) -> None:
        """Make the acceptance coefficients method answer as WB's "temporarily disabled" one (404)."""
        with self.lock:
            self.slots.disabled = disabled

    def record(self, kind: str, cabinet_id: str, payload: dict[str, Any], result: dict[str, Any]) -> None:
        self.writes.append(Write(kind, cabinet_id, self.now(), payload, result))


class Truth:
    """The simulator's own answers, in WB's JSON shapes and in reconciled totals.

    Definitions that reconcile (see also wb_simulator.views and wb_simulator.finance):

    - ``orders(c, day)`` are the rows ``GET /api/v1/supplier/orders?flag=1&dateFrom=day`` returns:
      orders placed that Moscow day, cancelled ones included (``isCancel``). Without ``day``: every
      row the ``flag=0`` feed holds now (90 days back), in feed order.
    - ``sales(c, day)`` likewise for ``/api/v1/supplier/sales``: sales ``S…`` and returns ``R…``
      whose own ``date`` falls on that day (return rows carry negated amounts).
    - ``funnel(c, day)[nm]["orderCount"]`` = the number of ``orders(c, day)`` rows of that product;
      ``orderSum`` = their priceWithDisc summed, rounded half up to rubles; ``cancelCount`` = those
      with ``isCancel``; ``buyoutCount`` = those bought out and not returned by now.
    - ``day_totals(c, day)`` sums all of that per product, with ad figures and the finance report
      lines attributed to the day of their source order (``srid`` → order date, else ``rrDate``),
      money as Decimal rubles.
    """

    def __init__(self, sim: Simulator):
        self.sim = sim

    def _cab(self, cabinet_id: str) -> tuple[Cabinet, int]:
        t = self.sim.sync()
        return self.sim.cabinet(cabinet_id), t

    def orders(self, cabinet_id: str, day: date | None = None) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            keep = self.sim.retention_from(t)
            if day is None:
                found = cab.orders_changed_since(0, t, keep, cap=len(cab.orders) + 1)
            else:
                found = [o for o in cab.orders_of_day(date_to_dn(day), t) if cab.visible(o, t, keep)]
            return [rows.order_row(o, t) for o in found]

    def sales(self, cabinet_id: str, day: date | None = None) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            keep = self.sim.retention_from(t)
            if day is None:
                found = cab.sales_since(0, t, keep, cap=2 * len(cab.orders) + 1)
            else:
                dn = date_to_dn(day)
                found = [(o, k) for o, k in cab.sales_between(day_start(dn), day_start(dn + 1), t) if cab.kept(o, keep)]
            return [rows.sale_row(o, k, t) for o, k in found]

    def report_lines(
        self, cabinet_id: str, date_from: date, date_to: date, period: str = "daily"
    ) -> list[dict[str, Any]]:
        """Every line ``POST /api/finance/v1/sales-reports/detailed`` would page out for the range."""
        with self.sim.lock:
            _, t = self._cab(cabinet_id)
            ledger = self.sim.ledgers[cabinet_id]
            lines = ledger.select(date_to_dn(date_from), date_to_dn(date_to), 0, 10**9, t, period)
            return [ledger.render(line, period) for line in lines]

    def ad_stats(self, cabinet_id: str, day: date) -> dict[int, dict[str, Any]]:
        """advert_id → that day's ``days[]`` item of ``/adv/v3/fullstats`` (past days only)."""
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            dn = date_to_dn(day)
            if dn >= day_number(t):
                return {}
            return {k: views.strip_private(v) for k, v in views.ad_day(cab, dn, t).items()}

    def funnel(self, cabinet_id: str, day: date) -> dict[int, dict[str, int]]:
        """nm_id → the day's funnel figures under WB's names (a history item's, plus cancelCount and
        cancelSum), for the products with any order that day."""
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            out = {}
            for nm, f in views.funnel_counts(cab, date_to_dn(day), t).items():
                out[nm] = {
                    **views.history_item(f),
                    "cancelCount": f["cancels"],
                    "cancelSum": views.rubles(f["cancel_k"]),
                }
            return out

    def prices(self, cabinet_id: str) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, _ = self._cab(cabinet_id)
            return [rows.goods(p) for p in cab.products]

    def stocks(self, cabinet_id: str) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            return views.stocks(cab, t)

    def cards(self, cabinet_id: str) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, _ = self._cab(cabinet_id)
            return [rows.card(p) for p in cab.products]

    def campaigns(self, cabinet_id: str) -> list[dict[str, Any]]:
        """Campaigns with their current bids (kopecks): what ``/api/advert/v2/adverts`` shows."""
        from wb_simulator.api.advert import advert_info

        with self.sim.lock:
            cab, _ = self._cab(cabinet_id)
            return [advert_info(c, cab) for c in cab.campaigns]

    def feedbacks(self, cabinet_id: str) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            inbox = self.sim.inboxes[cabinet_id]
            inbox.ensure(t)
            return [f.render(cab) for f in inbox.feedbacks]

    def questions(self, cabinet_id: str) -> list[dict[str, Any]]:
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            inbox = self.sim.inboxes[cabinet_id]
            inbox.ensure(t)
            return [q.render(cab) for q in inbox.questions]

    def news(self) -> list[dict[str, Any]]:
        with self.sim.lock:
            t = self.sim.sync()
            return self.sim.news.select(t, None, 0, limit=10**9)

    def coefficients(self, warehouse_ids: list[int] | None = None) -> list[dict[str, Any]]:
        with self.sim.lock:
            t = self.sim.sync()
            return self.sim.slots.coefficients(t, None if warehouse_ids is None else set(warehouse_ids))

    def day_totals(self, cabinet_id: str, day: date) -> dict[str, Any]:
        """Reconciled totals of one Moscow day: per product (``by_nm``) and for the cabinet.

        Sales domain (orders placed that day): ``orders``, ``orders_sum``, ``cancels``, ``buyouts``,
        ``returns``. Ads (that day's fullstats): ``ad_views``, ``ad_clicks``, ``ad_spend``,
        ``ad_orders``. Finance (report lines whose source order was placed that day, or whose
        ``rrDate`` is that day when they have no order): ``retail_amount``, ``for_pay``,
        ``commission``, ``acquiring``, ``logistics``, ``penalty``, ``storage``, ``acceptance``,
        ``deduction`` (sales minus returns for the first four). Money is Decimal rubles.
        """
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            dn = date_to_dn(day)
            by_nm: dict[int, dict[str, Any]] = defaultdict(lambda: defaultdict(lambda: Decimal(0)))
            for nm, f in views.funnel_counts(cab, dn, t).items():
                acc = by_nm[nm]
                acc["orders"] += f["orders"]
                acc["orders_sum"] += Decimal(f["order_k"]) / 100
                acc["cancels"] += f["cancels"]
                acc["buyouts"] += f["buyouts"]
                acc["returns"] += f["returns"]
            if dn < day_number(t):
                for day_row in views.ad_day(cab, dn, t).values():
                    for app in day_row["apps"]:
                        for nm_row in app["nms"]:
                            acc = by_nm[nm_row["nmId"]]
                            acc["ad_views"] += nm_row["views"]
                            acc["ad_clicks"] += nm_row["clicks"]
                            acc["ad_spend"] += Decimal(nm_row["_sum_k"]) / 100
                            acc["ad_orders"] += nm_row["orders"]
            ledger = self.sim.ledgers[cabinet_id]
            ledger.ensure(t)
            for line in ledger.by_source_day.get(dn, ()):
                nm = line.product.nm_id if line.product is not None else 0
                acc = by_nm[nm]
                sign = -1 if line.kind == "return" else 1
                for key, kopecks in line_amounts(line).items():
                    if key in ("retail_amount", "for_pay", "commission", "acquiring"):
                        kopecks *= sign
                    acc[key] += Decimal(kopecks) / 100
            total: dict[str, Any] = defaultdict(lambda: Decimal(0))
            for acc in by_nm.values():
                for k, v in acc.items():
                    total[k] += v
            return {
                "day": day,
                "by_nm": {nm: _plain(acc) for nm, acc in sorted(by_nm.items())},
                "total": _plain(total),
            }

    def summary(self, cabinet_id: str) -> dict[str, Any]:
        """Counts for a glance (the admin route and the CLI)."""
        with self.sim.lock:
            cab, t = self._cab(cabinet_id)
            keep = self.sim.retention_from(t)
            orders = cab.orders_changed_since(0, t, keep, cap=len(cab.orders) + 1)
            sales = cab.sales_since(0, t, keep, cap=2 * len(cab.orders) + 1)
            return {
                "cabinet_id": cab.id,
                "seller_sid": cab.sid,
                "now": self.sim.now().isoformat(),
                "products": len(cab.products),
                "orders": len(orders),
                "cancelled": sum(1 for o in orders if o.cancel_at is not None and o.cancel_at <= t),
                "sales": sum(1 for _, k in sales if k == 0),
                "returns": sum(1 for _, k in sales if k == 1),
                "campaigns": len(cab.campaigns),
            }


def _plain(acc: dict[str, Any]) -> dict[str, Any]:
    return {k: (int(v) if k in _COUNTS else v) for k, v in sorted(acc.items())}


_COUNTS = {"orders", "cancels", "buyouts", "returns", "ad_views", "ad_clicks", "ad_orders"}
