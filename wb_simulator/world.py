"""One cabinet's world: its catalog, and orders whose whole life is drawn when they are placed.

Every order is generated with its fate: when it is cancelled, or when it is bought out and maybe
returned, and whether the buyer leaves a feedback. Those events lie in the (simulated) future; what
the API shows at time T is exactly the events at or before T. Moving the clock therefore "makes
things happen" (cancellations, sales, returns of older orders) without any further randomness, and
a day's data never depends on when or how often it was looked at. Direct mutators
(``cancel_order``, ``return_sale``) rewrite an order's fate at the current time.

Days are generated lazily, in order, from seeds derived from (simulator seed, cabinet, Moscow day),
with numpy drawing a whole day at once; an order is a small ``__slots__`` object.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wb_simulator import catalogs
from wb_simulator.disorder import (
    FOREIGN_ORDER_DAYS,
    LATE_CANCEL_MAX,
    LATE_CANCEL_MIN,
    LATE_ORDER_MAX,
    LATE_ORDER_MIN,
    REDATE_MAX,
    REDATE_MIN,
    REVISE_AD_MAX,
    Disorder,
)
from wb_simulator.timefmt import DAY, day_number, day_start

CABINET_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class CabinetSpec:
    """What one simulated seller cabinet looks like. Everything else follows from the seed."""

    id: str
    products: int = 40
    orders_per_day: int = 300
    history_days: int = 100
    campaigns: int = 4
    name: str | None = None
    #: Share of orders cancelled (by the buyer, or not picked up); the rest are bought out.
    cancel_rate: float = 0.12
    #: Share of bought-out orders returned later.
    return_rate: float = 0.06
    #: Share of bought-out orders that get a feedback.
    feedback_rate: float = 0.08
    questions_per_day: float = 3.0
    #: WB's disorder modes (wb_simulator.disorder); None: the tidy world.
    disorder: Disorder | None = None

    def __post_init__(self) -> None:
        if not CABINET_ID_RE.match(self.id):
            raise ValueError(f"cabinet id must be 1-64 letters, digits, '_', '.' or '-', got {self.id!r}")
        for name in ("products", "history_days"):
            if getattr(self, name) < 1:
                raise ValueError(f"CabinetSpec.{name} must be at least 1, got {getattr(self, name)!r}")
        if self.orders_per_day < 0 or self.campaigns < 0 or self.questions_per_day < 0:
            raise ValueError("CabinetSpec.orders_per_day, campaigns and questions_per_day must not be negative")
        for name in ("cancel_rate", "return_rate", "feedback_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"CabinetSpec.{name} must be between 0 and 1, got {getattr(self, name)!r}")


def seed_of(*parts: object) -> int:
    """A stable 32-bit seed from any parts (never Python's salted hash())."""
    return zlib.crc32(":".join(str(p) for p in parts).encode())


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(seed_of(*parts))


def uuid_from(*parts: object) -> str:
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


@dataclass(slots=True)
class Size:
    chrt_id: int
    tech_size: str
    wb_size: str
    barcode: str


@dataclass(slots=True, eq=False)
class Product:
    idx: int
    nm_id: int
    imt_id: int
    vendor_code: str
    brand: str
    subject_id: int
    subject_name: str
    category: str
    commission: float
    title: str
    sizes: list[Size]
    price: int  # rubles, before the seller's discount
    discount: int  # seller's discount, %
    club_discount: int
    created_ts: int
    updated_ts: int

    @property
    def discounted_kopecks(self) -> int:
        """Price after the seller's discount, in kopecks (exact: whole rubles times whole percent)."""
        return self.price * (100 - self.discount)


class Order:
    """One order (one unit) and its fate. Times are Unix seconds; None means "never"."""

    __slots__ = (
        "cancel_at",
        "date",
        "discount",
        "feedback_at",
        "fin_k",
        "g_number",
        "idx",
        "income_id",
        "lcd0",
        "moved_at",
        "moved_date",
        "product",
        "pwd_k",
        "region",
        "return_at",
        "sale_at",
        "sale_moved_at",
        "sale_moved_date",
        "size",
        "spp",
        "srid",
        "sticker",
        "total_price",
        "warehouse",
    )
    idx: int
    srid: str
    g_number: str
    sticker: str
    product: Product
    size: Size
    date: int  # placed
    lcd0: int  # first lastChangeDate (the order reaches the feed)
    warehouse: int  # index into catalogs.STOCK_WAREHOUSES
    region: int  # index into catalogs.REGIONS
    income_id: int
    total_price: int  # rubles
    discount: int
    spp: int
    pwd_k: int  # priceWithDisc, kopecks
    fin_k: int  # finishedPrice, kopecks
    cancel_at: int | None
    sale_at: int | None
    return_at: int | None
    feedback_at: int | None
    #: WB re-dates the order at ``moved_at`` (a newer lastChangeDate) to ``moved_date`` (Disorder.redated_orders).
    moved_at: int | None
    moved_date: int | None
    #: Likewise for its sale (``S…``): from ``sale_moved_at`` on, the sale's date is ``sale_moved_date``.
    sale_moved_at: int | None
    sale_moved_date: int | None

    def __init__(self) -> None:
        self.cancel_at = None
        self.sale_at = None
        self.return_at = None
        self.feedback_at = None
        self.moved_at = self.moved_date = None
        self.sale_moved_at = self.sale_moved_date = None

    def last_change(self, t: int) -> int:
        """``lastChangeDate`` as seen at time ``t``: creation, or the latest change that has happened
        (a cancellation, a re-dating)."""
        at = self.lcd0
        for change in (self.cancel_at, self.moved_at):
            if change is not None and at < change <= t:
                at = change
        return at

    def date_at(self, t: int) -> int:
        """The order's ``date`` as seen at time ``t`` (WB may have re-dated it)."""
        m = self.moved_at
        return self.moved_date if m is not None and m <= t and self.moved_date is not None else self.date

    def sale_date_at(self, t: int) -> int | None:
        """The sale's ``date`` as seen at time ``t`` (WB may have re-dated it)."""
        m = self.sale_moved_at
        return self.sale_moved_date if m is not None and m <= t else self.sale_at

    def sale_change_at(self, t: int) -> int | None:
        """The sale's ``lastChangeDate`` as seen at time ``t``: the sale, or its re-dating."""
        m = self.sale_moved_at
        return m if m is not None and m <= t else self.sale_at

    @property
    def sale_id(self) -> str:
        return f"S{9_000_000_000 + self.idx}"

    @property
    def return_id(self) -> str:
        return f"R{9_000_000_000 + self.idx}"

    @property
    def for_pay_k(self) -> int:
        """What WB pays the seller for the sale, kopecks (the report's forPay; the sales feed's forPay)."""
        commission = round(self.pwd_k * self.product.commission / 100)
        acquiring = round(self.pwd_k * ACQUIRING_PERCENT / 100)
        return self.pwd_k - commission - acquiring


#: Acquiring fee, % of the sale amount (the report's acquiringPercent).
ACQUIRING_PERCENT = 1.5


@dataclass(slots=True, eq=False)
class Campaign:
    advert_id: int
    name: str
    status: int
    bid_type: str  # unified | manual
    payment_type: str  # cpm | cpc
    placements: dict[str, bool]
    nm_ids: list[int]
    associated: list[int]  # products that get attributed ad orders without being advertised
    bids: dict[int, dict[str, int]]  # nm_id → {"search", "recommendations"}, kopecks
    base_bids: dict[int, int]  # the search bids the campaign started with
    start_dn: int | None
    end_dn: int | None
    created_ts: int
    started_ts: int | None
    updated_ts: int
    #: nm_id → [(time set, search bid)], in time order: every bid change through the API.
    bid_history: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def bid_at(self, nm_id: int, t: int) -> int:
        """The search bid (kopecks) in effect at ``t``: the last one set before it, else the first one."""
        bid = self.base_bids.get(nm_id, 0)
        for at, value in self.bid_history.get(nm_id, ()):
            if at >= t:
                break
            bid = value
        return bid


class Cabinet:
    """The generated world of one cabinet, extended day by day as the clock moves."""

    def __init__(self, spec: CabinetSpec, index: int, seed: int, first_dn: int):
        self.spec = spec
        self.index = index
        self.seed = seed
        self.id = spec.id
        self.sid = uuid_from(seed, "sid", spec.id)
        self.name = spec.name or f"ИП Продавец {index + 1}"
        self.tin = f"77{seed_of(seed, 'tin', spec.id) % 10**8:08d}"
        self.first_dn = first_dn
        self.next_dn = first_dn  # first day not generated yet
        self.products: list[Product] = []
        self.by_nm: dict[int, Product] = {}
        self.orders: list[Order] = []
        #: Orders outside every window the orders feed serves, known only by their returns
        #: (``Disorder.foreign_returns``); event index ``-1 - i`` names ``ghosts[i]``.
        self.ghosts: list[Order] = []
        #: How long after its day every order of the day is in the orders feed, with its final date, and
        #: its ad statistics are final (seconds): the day's figures are cached from then on.
        d = spec.disorder
        self.feed_lag = LATE_ORDER_MAX if d is not None and d.late_orders else 1800
        if d is not None and d.redated_orders:  # an order of the next day may still move onto this one
            self.feed_lag += DAY + REDATE_MAX
        if d is not None and d.revised_ad_days:
            self.feed_lag = max(self.feed_lag, REVISE_AD_MAX + 1)
        #: Orders (sales) WB re-dates (Disorder.redated_orders, ``redate_order``): few, looked at by day.
        self.moved_orders: list[Order] = []
        self.moved_sales: list[Order] = []
        #: (advert_id, day number) → that day's statistics item, hand-made (``Simulator.set_ad_day``).
        self.ad_overrides: dict[tuple[int, int], dict[str, Any]] = {}
        self.order_ts: list[int] = []  # creation times, ascending (orders are appended in time order)
        self.by_srid: dict[str, Order] = {}
        # Change events, sorted: orders (time, order idx); sales (time, order idx, 0 sale / 1 return).
        self.order_events: list[tuple[int, int]] = []
        self.sale_events: list[tuple[int, int, int]] = []
        self.feedback_events: list[tuple[int, int]] = []
        self.question_events: list[tuple[int, int, int]] = []  # (time, seq, product idx)
        self.campaigns: list[Campaign] = []
        self._nm_day_cache: dict[int, dict[int, list[int]]] = {}
        self.ads_cache: dict[int, dict[int, dict[str, Any]]] = {}
        self._make_catalog()
        self._make_campaigns()

    # -- catalog ---------------------------------------------------------------------------------

    def _make_catalog(self) -> None:
        rng = rng_for(self.seed, "catalog", self.id)
        n = self.spec.products
        nm_ids = sorted(set(int(x) for x in rng.integers(100_000_000, 900_000_000, n * 2)))[:n]
        nm_ids = [int(x) for x in rng.permutation(nm_ids)]
        base_ts = day_start(self.first_dn) - 30 * DAY
        chrt = 300_000_000 + int(rng.integers(0, 10_000_000))
        for i, nm in enumerate(nm_ids):
            subject = catalogs.SUBJECTS[int(rng.integers(0, len(catalogs.SUBJECTS)))]
            brand = catalogs.BRANDS[int(rng.integers(0, len(catalogs.BRANDS)))]
            size_set = catalogs.SIZE_SETS[int(rng.integers(0, len(catalogs.SIZE_SETS)))]
            sizes = []
            for tech in size_set:
                chrt += int(rng.integers(1, 50))
                barcode = f"20{int(rng.integers(10**10, 10**11 - 1)):011d}"
                sizes.append(Size(chrt, tech, "" if tech == "0" else tech, barcode))
            created = base_ts + int(rng.integers(0, 20 * DAY))
            product = Product(
                idx=i,
                nm_id=nm,
                imt_id=nm // 2 + 17,
                vendor_code=f"{self.id.upper()}-{i + 1:04d}",
                brand=brand,
                subject_id=subject[0],
                subject_name=subject[1],
                category=subject[2],
                commission=subject[3],
                title=f"{subject[1]} {catalogs.ADJECTIVES[i % len(catalogs.ADJECTIVES)]} {brand}",
                sizes=sizes,
                price=int(rng.integers(6, 100)) * 50,
                discount=int(rng.choice([0, 10, 15, 20, 25, 30, 40, 50])),
                club_discount=int(rng.choice([0, 3, 5])),
                created_ts=created,
                updated_ts=created + int(rng.integers(0, 5 * DAY)),
            )
            self.products.append(product)
            self.by_nm[nm] = product
        weights = 1.0 / np.arange(1, n + 1) ** 0.8  # a few bestsellers, a long tail
        self.popularity = weights / weights.sum()

    def _make_campaigns(self) -> None:
        rng = rng_for(self.seed, "campaigns", self.id)
        last_dn = self.first_dn + self.spec.history_days
        statuses = [9, 11, 7, 4, 9, 8, 9, 11]
        for i in range(self.spec.campaigns):
            status = statuses[i % len(statuses)]
            k = min(len(self.products), int(rng.integers(2, 6)))
            picks = rng.choice(len(self.products), size=min(len(self.products), k + 2), replace=False)
            nm_ids = [self.products[int(j)].nm_id for j in picks[:k]]
            associated = [self.products[int(j)].nm_id for j in picks[k:]]
            start_dn = self.first_dn + int(rng.integers(0, max(1, self.spec.history_days // 2)))
            end_dn: int | None = None
            if status in (7, 11, 8):
                end_dn = min(last_dn - 1, start_dn + int(rng.integers(5, 30)))
            unified = i % 3 == 1
            payment = "cpc" if i % 2 == 1 else "cpm"
            created = day_start(start_dn) - int(rng.integers(3600, 3 * DAY))
            bids: dict[int, dict[str, int]] = {}
            for nm in nm_ids:
                search = min_bid(payment, nm, "search") + int(rng.integers(0, 40)) * 100
                recommendations = min_bid(payment, nm, "recommendations") + int(rng.integers(0, 40)) * 100
                if unified:
                    search = recommendations = max(search, recommendations)
                bids[nm] = {"search": search, "recommendations": recommendations}
            self.campaigns.append(
                Campaign(
                    advert_id=20_000_000 + seed_of(self.seed, "advert", self.id, i) % 10_000_000,
                    name=f"Кампания {i + 1}",
                    status=status,
                    bid_type="unified" if unified else "manual",
                    payment_type=payment,
                    placements={"search": True, "recommendations": unified or i % 2 == 0},
                    nm_ids=nm_ids,
                    associated=associated,
                    bids=bids,
                    base_bids={nm: b["search"] for nm, b in bids.items()},
                    start_dn=start_dn if status != 4 else None,
                    end_dn=end_dn,
                    created_ts=created,
                    started_ts=None if status == 4 else day_start(start_dn) + 9 * 3600,
                    updated_ts=created + 3600,
                )
            )

    def campaign(self, advert_id: int) -> Campaign | None:
        for c in self.campaigns:
            if c.advert_id == advert_id:
                return c
        return None

    # -- orders ----------------------------------------------------------------------------------

    def ensure(self, t: int) -> None:
        """Generate every day up to and including the Moscow day of ``t``."""
        last = day_number(t)
        while self.next_dn <= last:
            self._generate_day(self.next_dn)
            self.next_dn += 1

    def _generate_day(self, dn: int) -> None:
        spec = self.spec
        rng = rng_for(self.seed, "orders", self.id, dn)
        weekday = (dn + 3) % 7  # 1970-01-01 was a Thursday
        trend = 1.0 + 0.002 * (dn - self.first_dn)
        n = (
            int(rng.poisson(spec.orders_per_day * catalogs.WEEKDAY_FACTORS[weekday] * trend))
            if spec.orders_per_day
            else 0
        )
        start = day_start(dn)
        hours = np.array(catalogs.HOUR_WEIGHTS)
        secs = np.sort(
            rng.choice(24, size=n, p=hours / hours.sum()) * 3600 + rng.integers(0, 3600, size=n)
        )  # ascending times within the day
        products = rng.choice(len(self.products), size=n, p=self.popularity)
        size_draw = rng.random(n)
        warehouses = rng.integers(0, len(catalogs.STOCK_WAREHOUSES), size=n)
        regions = rng.choice(
            len(catalogs.REGIONS), size=n, p=np.array(catalogs.REGION_WEIGHTS) / sum(catalogs.REGION_WEIGHTS)
        )
        lcd_delay = rng.integers(60, 1800, size=n)
        fate = rng.random(n)
        cancel_delay = rng.integers(2 * 3600, 3 * DAY, size=n)
        sale_delay = rng.integers(DAY // 2, 7 * DAY, size=n)
        returned = rng.random(n) < spec.return_rate
        return_delay = rng.integers(DAY, 14 * DAY, size=n)
        feedback = rng.random(n) < spec.feedback_rate
        feedback_delay = rng.integers(3600, 5 * DAY, size=n)
        spp = rng.choice([0, 5, 10, 15, 20, 25, 30], size=n)
        srid_hi = rng.integers(0, 2**62, size=n)
        gnum = rng.integers(10**18, 9 * 10**18, size=n)
        sticker = rng.integers(10**9, 9 * 10**9, size=n)
        income_base = 50_000_000 + (dn // 7) * 100
        orders, order_ts, by_srid, products_ = self.orders, self.order_ts, self.by_srid, self.products
        new_order_events: list[tuple[int, int]] = []
        new_sale_events: list[tuple[int, int, int]] = []
        new_feedback_events: list[tuple[int, int]] = []
        cancel_rate = spec.cancel_rate
        # Plain Python lists: indexing numpy arrays one scalar at a time is what would cost here.
        for (sec, pi, size_u, wh, region, lcd_d, fate_u, cancel_d, sale_d, ret, ret_d, fb, fb_d, spp_, hi, gn, st) in zip(
            secs.tolist(), products.tolist(), size_draw.tolist(), warehouses.tolist(), regions.tolist(),
            lcd_delay.tolist(), fate.tolist(), cancel_delay.tolist(), sale_delay.tolist(), returned.tolist(),
            return_delay.tolist(), feedback.tolist(), feedback_delay.tolist(), spp.tolist(), srid_hi.tolist(),
            gnum.tolist(), sticker.tolist(), strict=True,
        ):  # fmt: skip
            o = Order()
            idx = o.idx = len(orders)
            p = products_[pi]
            o.product = p
            o.size = p.sizes[int(size_u * len(p.sizes))]
            ts = o.date = start + sec
            o.lcd0 = ts + lcd_d
            o.srid = f"{hi:016x}{self.index:02x}{idx:08x}"
            o.g_number = str(gn)
            o.sticker = str(st)
            o.warehouse = wh
            o.region = region
            o.income_id = income_base + wh
            o.total_price = p.price
            o.discount = p.discount
            o.spp = spp_
            pwd = o.pwd_k = p.price * (100 - p.discount)
            o.fin_k = round(pwd * (100 - spp_) / 100)
            if fate_u < cancel_rate:
                o.cancel_at = ts + cancel_d
            else:
                sale_at = o.sale_at = ts + sale_d
                new_sale_events.append((sale_at, idx, 0))
                if ret:
                    o.return_at = sale_at + ret_d
                    new_sale_events.append((o.return_at, idx, 1))
                if fb:
                    o.feedback_at = sale_at + fb_d
                    new_feedback_events.append((o.feedback_at, idx))
            orders.append(o)
            order_ts.append(ts)
            by_srid[o.srid] = o
        day_orders = orders[len(orders) - n :] if n else []
        if spec.disorder is not None:
            self._disturb(dn, spec.disorder, day_orders, new_sale_events)
        for o in day_orders:
            new_order_events.append((o.lcd0, o.idx))
            if o.cancel_at is not None:
                new_order_events.append((o.cancel_at, o.idx))
            if o.moved_at is not None:
                new_order_events.append((o.moved_at, o.idx))
        _merge(self.order_events, new_order_events)
        _merge(self.sale_events, new_sale_events)
        _merge(self.feedback_events, new_feedback_events)
        q = int(rng.poisson(spec.questions_per_day))
        for j, (sec, pi) in enumerate(
            zip(
                np.sort(rng.integers(0, DAY, size=q)),
                rng.choice(len(self.products), size=q, p=self.popularity),
                strict=True,
            )
        ):
            bisect.insort(self.question_events, (start + int(sec), dn * 1000 + j, int(pi)))

    def _disturb(
        self, dn: int, disorder: Disorder, day_orders: list[Order], new_sale_events: list[tuple[int, int, int]]
    ) -> None:
        """Apply the disorder modes to day ``dn``'s new orders (before their events are recorded),
        from a random stream of their own: late delivery, late cancellation, a foreign return."""
        rng = rng_for(self.seed, "disorder", self.id, dn)
        n = len(day_orders)
        late = (rng.random(n) < disorder.late_orders).tolist()
        late_delay = rng.integers(LATE_ORDER_MIN, LATE_ORDER_MAX, size=n).tolist()
        weeks = (rng.random(n) < disorder.late_cancellations).tolist()
        cancel_delay = rng.integers(LATE_CANCEL_MIN, LATE_CANCEL_MAX, size=n).tolist()
        for o, is_late, delay, is_weeks, cancel_d in zip(
            day_orders, late, late_delay, weeks, cancel_delay, strict=True
        ):
            if is_weeks and o.cancel_at is not None:
                o.cancel_at = o.date + cancel_d
            if is_late:
                o.lcd0 = o.date + delay
            if o.cancel_at is not None and o.cancel_at <= o.lcd0:
                o.cancel_at = o.lcd0 + 60  # a cancellation is a change of an order already delivered
        if rng.random() < disorder.foreign_returns:
            ghost = self._ghost(dn, rng)
            assert ghost.return_at is not None
            new_sale_events.append((ghost.return_at, ghost.idx, 1))
        if disorder.redated_orders or disorder.redated_sales:
            # A stream of its own: the modes above draw the same with or without these.
            redate = rng_for(self.seed, "disorder-redate", self.id, dn)
            orders_moved = (redate.random(n) < disorder.redated_orders).tolist()
            order_delay = redate.integers(REDATE_MIN, REDATE_MAX, size=n).tolist()
            sales_moved = (redate.random(n) < disorder.redated_sales).tolist()
            sale_delay = redate.integers(REDATE_MIN, REDATE_MAX, size=n).tolist()
            for o, moved, delay, sale_moved, sale_d in zip(
                day_orders, orders_moved, order_delay, sales_moved, sale_delay, strict=True
            ):
                if moved:
                    o.moved_at, o.moved_date = o.lcd0 + delay, o.date - DAY
                    self.moved_orders.append(o)
                if sale_moved and o.sale_at is not None:
                    o.sale_moved_at, o.sale_moved_date = o.sale_at + sale_d, o.sale_at - DAY
                    self.moved_sales.append(o)
                    new_sale_events.append((o.sale_moved_at, o.idx, 0))

    def _ghost(self, dn: int, rng: np.random.Generator) -> Order:
        """An order placed 95-150 days before day ``dn`` (outside the orders feed), bought out then,
        returned on ``dn``."""
        o = Order()
        k = len(self.ghosts)
        o.idx = -1 - k
        p = o.product = self.products[int(rng.integers(0, len(self.products)))]
        o.size = p.sizes[int(rng.integers(0, len(p.sizes)))]
        o.date = day_start(dn - int(rng.integers(*FOREIGN_ORDER_DAYS))) + int(rng.integers(0, DAY))
        o.lcd0 = o.date + 600
        o.srid = f"{int(rng.integers(0, 2**62)):016x}{self.index:02x}f{k:07x}"
        o.g_number = str(int(rng.integers(10**18, 9 * 10**18)))
        o.sticker = str(int(rng.integers(10**9, 9 * 10**9)))
        o.warehouse = int(rng.integers(0, len(catalogs.STOCK_WAREHOUSES)))
        o.region = int(rng.integers(0, len(catalogs.REGIONS)))
        o.income_id = 50_000_000 + (day_number(o.date) // 7) * 100 + o.warehouse
        o.total_price, o.discount, o.spp = p.price, p.discount, 0
        o.pwd_k = o.fin_k = p.price * (100 - p.discount)
        o.sale_at = o.date + 3 * DAY
        o.return_at = day_start(dn) + int(rng.integers(0, DAY))
        self.ghosts.append(o)
        return o

    def order(self, idx: int) -> Order:
        """The order an event names (a negative index names a foreign return's order)."""
        return self.orders[idx] if idx >= 0 else self.ghosts[-1 - idx]

    def kept(self, o: Order, retention_from: int) -> bool:
        """Whether the statistics feeds still serve the order's rows (WB keeps 90 days; a foreign
        return is served by its own recent date)."""
        return o.date >= retention_from or o.idx < 0

    def visible(self, o: Order, t: int, retention_from: int) -> bool:
        return o.lcd0 <= t and o.date >= retention_from

    def orders_changed_since(self, since: int, t: int, retention_from: int, cap: int) -> list[Order]:
        """Orders whose lastChangeDate (as of ``t``) is in [since, t], ordered by it (see ``_page``)."""
        orders = self.orders

        def pick(event: tuple[int, int]) -> Order | None:
            o = orders[event[1]]
            return o if o.last_change(t) == event[0] and o.date >= retention_from else None

        return _page(self.order_events, since, t, cap, pick)

    def orders_of_day(self, dn: int, t: int | None = None) -> list[Order]:
        """The orders whose ``date`` is on day ``dn``: as of ``t`` (WB may have re-dated some), or as
        they were placed (``t`` None)."""
        lo = bisect.bisect_left(self.order_ts, day_start(dn))
        hi = bisect.bisect_left(self.order_ts, day_start(dn + 1))
        placed = self.orders[lo:hi]
        if t is None or not self.moved_orders:
            return placed
        first, end = day_start(dn), day_start(dn + 1)
        out = [o for o in placed if first <= o.date_at(t) < end]
        out += [o for o in self.moved_orders if first <= o.date_at(t) < end and not first <= o.date < end]
        return out

    def sales_since(self, since: int, t: int, retention_from: int, cap: int) -> list[tuple[Order, int]]:
        """(order, 0 sale / 1 return) rows with date in [since, t], ordered by it (see ``_page``)."""

        def pick(event: tuple[int, int, int]) -> tuple[Order, int] | None:
            ts, idx, kind = event
            o = self.order(idx)
            changed = o.return_at if kind else o.sale_change_at(t)
            return (o, kind) if changed == ts and self.kept(o, retention_from) else None

        return _page(self.sale_events, since, t, cap, pick)

    def sales_between(self, lo: int, hi: int, t: int) -> list[tuple[Order, int]]:
        """Every sale/return row with date (as of ``t``) in [lo, hi) and at or before ``t`` (no retention cut)."""
        out = []
        events = self.sale_events
        i = bisect.bisect_left(events, (lo, -1, -1))
        end = min(hi, t + 1)
        while i < len(events) and events[i][0] < end:
            ts, idx, kind = events[i]
            i += 1
            o = self.order(idx)
            if kind:
                if o.return_at == ts:
                    out.append((o, kind))
            elif o.sale_at == ts and lo <= (o.sale_date_at(t) or ts) < hi:
                out.append((o, kind))
        for o in self.moved_sales:  # re-dated onto [lo, hi) from another day
            at, moved = o.sale_at, o.sale_moved_at
            if at is not None and moved is not None and moved <= t and not lo <= at < hi:
                if lo <= (o.sale_date_at(t) or at) < hi:
                    out.append((o, 0))
        return out

    def nm_day_orders(self, dn: int, t: int) -> dict[int, list[int]]:
        """nm_id → [orders placed that day and visible at t, their priceWithDisc in kopecks]."""
        complete = day_start(dn + 1) + self.feed_lag <= t  # every order of the day is visible: cacheable
        if complete and dn in self._nm_day_cache:
            return self._nm_day_cache[dn]
        out: dict[int, list[int]] = {}
        for o in self.orders_of_day(dn, t):
            if o.lcd0 <= t:
                acc = out.setdefault(o.product.nm_id, [0, 0])
                acc[0] += 1
                acc[1] += o.pwd_k
        if complete:
            self._nm_day_cache[dn] = out
        return out

    # -- mutations -------------------------------------------------------------------------------

    def forget(self, *days: int) -> None:
        """Drop the cached figures of these days (a mutation changed them)."""
        for dn in days:
            self._nm_day_cache.pop(dn, None)
            self.ads_cache.pop(dn, None)

    def place(self, product: Product, at: int, pwd_k: int, sale_at: int | None = None) -> Order:
        """A hand-made order of one unit of ``product`` placed at ``at`` for ``pwd_k`` kopecks
        (priceWithDisc; no discount, no SPP), in the feed a minute later, bought out at ``sale_at``."""
        if self.order_ts and at < self.order_ts[-1]:
            raise ValueError("orders are placed in time order: the cabinet has a later order already")
        if sale_at is not None and sale_at <= at:
            raise ValueError("a sale comes after its order")
        o = Order()
        idx = o.idx = len(self.orders)
        o.product, o.size = product, product.sizes[0]
        o.date, o.lcd0 = at, at + 60
        o.srid = f"{seed_of(self.seed, 'placed', self.id, idx):016x}{self.index:02x}{idx:08x}"
        o.g_number, o.sticker = str(10**18 + idx), str(10**9 + idx)
        o.warehouse = o.region = 0
        o.income_id = 50_000_000
        o.total_price, o.discount, o.spp = pwd_k // 100, 0, 0
        o.pwd_k = o.fin_k = pwd_k
        o.sale_at = sale_at
        self.orders.append(o)
        self.order_ts.append(at)
        self.by_srid[o.srid] = o
        bisect.insort(self.order_events, (o.lcd0, idx))
        if sale_at is not None:
            bisect.insort(self.sale_events, (sale_at, idx, 0))
        self.forget(day_number(at))
        return o

    def redate(self, o: Order, new_date: int, t: int) -> None:
        """WB re-dates the order now: its ``date`` becomes ``new_date``, its lastChangeDate now."""
        o.moved_at = max(t, o.last_change(t) + 1)
        o.moved_date = new_date
        if o not in self.moved_orders:
            self.moved_orders.append(o)
        bisect.insort(self.order_events, (o.moved_at, o.idx))
        self.forget(day_number(o.date), day_number(new_date))

    def redate_sale(self, o: Order, new_date: int, t: int) -> None:
        """WB re-dates the order's sale now: its ``date`` becomes ``new_date``, its lastChangeDate now."""
        if o.sale_at is None or o.sale_at > t:
            raise ValueError(f"order {o.srid} has not been bought out yet")
        o.sale_moved_at = max(t, (o.sale_change_at(t) or t) + 1)
        o.sale_moved_date = new_date
        if o not in self.moved_sales:
            self.moved_sales.append(o)
        bisect.insort(self.sale_events, (o.sale_moved_at, o.idx, 0))

    def cancel(self, o: Order, t: int) -> None:
        if o.cancel_at is not None and o.cancel_at <= t:
            raise ValueError(f"order {o.srid} is already cancelled")
        if o.sale_at is not None and o.sale_at <= t:
            raise ValueError(f"order {o.srid} is already bought out; return it instead")
        o.cancel_at = max(t, o.lcd0 + 1)
        o.sale_at = o.return_at = o.feedback_at = None
        bisect.insort(self.order_events, (o.cancel_at, o.idx))

    def return_(self, o: Order, t: int) -> None:
        if o.sale_at is None or o.sale_at > t:
            raise ValueError(f"order {o.srid} has not been bought out yet")
        if o.return_at is not None and o.return_at <= t:
            raise ValueError(f"order {o.srid} is already returned")
        o.return_at = t
        bisect.insort(self.sale_events, (t, o.idx, 1))


def _page(events: list[Any], since: int, t: int, cap: int, pick: Callable[[Any], Any]) -> list[Any]:
    """One flag=0 page: the rows of ``events`` (sorted by time) timed in [since, t], in time order.

    WB's contract is "lastChangeDate >= dateFrom", the next page starting at the last row's
    lastChangeDate, and ``[]`` at the end. So a page never ends inside a group of rows with the same
    time (it may pass ``cap`` by that group), and a page whose rows all sit exactly at ``since`` is
    the previous page's tail, already delivered: it is answered ``[]``. The last row of a page is
    therefore repeated as the first of the next one, as with WB; clients dedupe by srid/saleID.
    """
    out: list[Any] = []
    last_ts: int | None = None
    i = bisect.bisect_left(events, (since,))
    n = len(events)
    while i < n:
        event = events[i]
        i += 1
        ts = event[0]
        if ts > t or (len(out) >= cap and ts != last_ts):
            break
        item = pick(event)
        if item is not None:
            out.append(item)
            last_ts = ts
    return [] if last_ts == since else out


def _merge(events: list[Any], new: list[Any]) -> None:
    """Merge ``new`` into the sorted ``events``. New events of a day all fall at or after its start,
    so only the tail of future events already scheduled has to be re-sorted (Timsort merges the two
    sorted runs in linear time)."""
    if not new:
        return
    new.sort()
    pos = bisect.bisect_left(events, new[0])
    tail = events[pos:]
    del events[pos:]
    tail.extend(new)
    tail.sort()
    events.extend(tail)


def min_bid(payment_type: str, nm_id: int, placement: str) -> int:
    """WB's minimum bid for a product and placement, kopecks: CPC from 150, CPM from 12500 (500 more
    in recommendations; a "combined" bid must clear both placements)."""
    if payment_type == "cpc":
        return 150 + (nm_id % 4) * 50
    base = 12_500 + (nm_id % 5) * 2_500
    return base + 500 if placement in ("recommendation", "recommendations", "combined") else base
