"""The repricer: every N hours, move each ruled product's price where its rule says, through WB's upload task.

A rule (table ``repricer_rules``, one per product) speaks in the price the buyer sees, after the
seller's discount ("selling price"), in rubles. The seller's discount is left as it is; the price
before the discount is what is uploaded. In order:

1. **Follow a target**: the selling price becomes ``target_price`` (no target: it stays where it is).
2. **Clamp to the ceiling**: not above ``max_price``.
3. **Protect the margin**: not below ``min_price``, and not below ``cost / (1 - min_margin_pct/100)``
   (the price at which the margin on cost is ``min_margin_pct``). The floor wins over the ceiling:
   never sell below the floor the seller set.
4. **Respect WB's quarantine**: WB puts a product in price quarantine (it keeps selling at the old
   price) when the new selling price is a third of the old one or less. A run never cuts the price
   by more than ``max_drop_pct`` (≤ 60 %, default 50 %); the next runs continue the descent.
5. The price before discount is rounded up to whole rubles (so the floor holds), or down when
   rounding up would cross the ceiling and rounding down keeps the floor.

A product whose price would not change is not uploaded. Pure functions here, the SQL and the run
below them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import psycopg

from optima_pipelines.engines.price_upload import send_chunk
from optima_pipelines.orchestration.queues import REPRICER_SCHEDULE
from optima_pipelines.wb import PriceUpdate, WbClient
from optima_pipelines.wb.client import PRICE_TASK_MAX_ITEMS

ENGINE = "repricer"
QUEUE = REPRICER_SCHEDULE
HUNDRED = Decimal(100)


@dataclass(frozen=True)
class Rule:
    id: int
    nm_id: int
    target_price: Decimal | None = None
    min_price: Decimal | None = None
    max_price: Decimal | None = None
    cost: Decimal | None = None
    min_margin_pct: Decimal | None = None
    max_drop_pct: Decimal = Decimal(50)


@dataclass(frozen=True)
class Decision:
    nm_id: int
    rule_id: int
    old_price: Decimal  # before discount, as WB has it
    discount: int
    new_price: int | None  # None: no change
    reason: str

    @property
    def old_selling(self) -> Decimal:
        return selling(self.old_price, self.discount)

    @property
    def new_selling(self) -> Decimal | None:
        return None if self.new_price is None else selling(Decimal(self.new_price), self.discount)


def selling(price: Decimal, discount: int) -> Decimal:
    """The price the buyer sees: the price before discount less the seller's discount."""
    return price * (HUNDRED - discount) / HUNDRED


def _rub(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01')).normalize():f}"


def margin_floor(rule: Rule) -> Decimal | None:
    if rule.cost is None or rule.min_margin_pct is None:
        return None
    return rule.cost / (1 - rule.min_margin_pct / HUNDRED)


def decide(rule: Rule, price: Decimal, discount: int) -> Decision:
    """Where the rule moves a product whose price before discount is ``price`` (pure)."""
    old = selling(price, discount)
    why: list[str] = []
    want = old
    if rule.target_price is not None and rule.target_price != old:
        want = rule.target_price
        why.append(f"target {_rub(rule.target_price)}")
    if rule.max_price is not None and want > rule.max_price:
        want = rule.max_price
        why.append(f"capped at the maximum {_rub(rule.max_price)}")
    floors = [f for f in (rule.min_price, margin_floor(rule)) if f is not None]
    floor = max(floors) if floors else None
    if floor is not None and want < floor:
        want = floor
        if floor == margin_floor(rule):
            margin, cost = rule.min_margin_pct or Decimal(0), rule.cost or Decimal(0)
            why.append(f"raised to keep a {_rub(margin)} % margin on cost {_rub(cost)}")
        else:
            why.append(f"raised to the minimum {_rub(floor)}")
    lowest = old * (1 - rule.max_drop_pct / HUNDRED)
    if want < lowest:
        want = lowest
        why.append(
            f"cut limited to {_rub(rule.max_drop_pct)} % this run (WB quarantines a cut to a third or less); "
            "the next runs continue"
        )
    share = (HUNDRED - discount) / HUNDRED
    new = int((want / share).to_integral_value(rounding=ROUND_CEILING))
    if rule.max_price is not None and selling(Decimal(new), discount) > rule.max_price:
        down = int((want / share).to_integral_value(rounding=ROUND_FLOOR))
        down_selling = selling(Decimal(down), discount)
        if (floor is None or down_selling >= floor) and down_selling * 3 > old:
            new = down
    if Decimal(new) == price:
        return Decision(rule.nm_id, rule.id, price, discount, None, "; ".join(why) or "already where the rule wants it")
    reason = "; ".join(why) or "rounded to whole rubles"
    return Decision(
        rule.nm_id,
        rule.id,
        price,
        discount,
        new,
        f"{_rub(old)} → {_rub(selling(Decimal(new), discount))}: {reason}",
    )


# -- slots --------------------------------------------------------------------------------------


def slot_start(now: datetime, interval_hours: int) -> datetime:
    """The start of the ``interval_hours`` slot holding ``now``: multiples of N hours since 00:00 UTC
    of 1970-01-01 (for N dividing 24, the same hours every day)."""
    period = interval_hours * 3600
    return datetime.fromtimestamp(int(now.timestamp()) // period * period, tz=UTC)


def slot_key(interval_hours: int, start: datetime) -> str:
    return f"{interval_hours}h:{start.astimezone(UTC).strftime('%Y-%m-%dT%H:%MZ')}"


@dataclass(frozen=True)
class Due:
    cabinet_id: str
    interval_hours: int
    start: datetime

    @property
    def slot(self) -> str:
        return slot_key(self.interval_hours, self.start)

    @property
    def run_key(self) -> str:
        return f"repricer:{self.cabinet_id}:{self.slot}"


def plan_due(
    groups: Sequence[tuple[str, int]], now: datetime, launched: dict[str, str], busy: set[str]
) -> tuple[list[Due], dict[str, str]]:
    """Which (cabinet, interval) groups get a run now, and the new cursor (group → last slot launched).

    A group is due once per slot: the first tick in a new slot launches it, unless a repricer run of
    the cabinet is queued or running (then a later tick of the same slot does). A group that appears
    (a new rule interval) runs in its current slot at once; one that disappears leaves the cursor."""
    due: list[Due] = []
    cursor: dict[str, str] = {}
    for cabinet_id, hours in sorted(set(groups)):
        group = f"{cabinet_id}:{hours}"
        start = slot_start(now, hours)
        key = slot_key(hours, start)
        if launched.get(group) == key or cabinet_id in busy:
            if group in launched:
                cursor[group] = launched[group]
            continue
        due.append(Due(cabinet_id, hours, start))
        cursor[group] = key
    return due, cursor


def due_groups(conn: psycopg.Connection) -> list[tuple[str, int]]:
    """(cabinet, interval) of the enabled rules of active cabinets (one cheap query per sensor tick)."""
    rows = conn.execute(
        "SELECT DISTINCT r.cabinet_id, r.interval_hours FROM repricer_rules r JOIN cabinets c ON c.id = r.cabinet_id"
        " WHERE r.enabled AND c.status = 'active' ORDER BY 1, 2"
    ).fetchall()
    return [(r[0], int(r[1])) for r in rows]


# -- one run ------------------------------------------------------------------------------------


def load_rules(conn: psycopg.Connection, cabinet_id: str, interval_hours: int) -> list[Rule]:
    rows = conn.execute(
        "SELECT id, nm_id, target_price, min_price, max_price, cost, min_margin_pct, max_drop_pct FROM repricer_rules"
        " WHERE cabinet_id = %s AND interval_hours = %s AND enabled ORDER BY nm_id",
        (cabinet_id, interval_hours),
    ).fetchall()
    return [Rule(*r) for r in rows]


def current_prices(conn: psycopg.Connection, cabinet_id: str, nm_ids: list[int]) -> dict[int, tuple[Decimal, int]]:
    rows = conn.execute(
        "SELECT nm_id, price, discount FROM prices WHERE cabinet_id = %s AND nm_id = ANY(%s)", (cabinet_id, nm_ids)
    ).fetchall()
    return {r[0]: (Decimal(r[1]), int(r[2])) for r in rows}


def slot_planned(conn: psycopg.Connection, cabinet_id: str, slot: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM repricer_outcomes WHERE cabinet_id = %s AND slot = %s LIMIT 1", (cabinet_id, slot)
    ).fetchone()
    return row is not None


def plan_slot(conn: psycopg.Connection, cabinet_id: str, slot: str, rules: list[Rule], run_id: str | None) -> None:
    """Decide every ruled product once per slot and record the decisions (with their chunk) before
    anything is sent; a retry of the slot finds them and sends the same chunks."""
    if slot_planned(conn, cabinet_id, slot):
        return
    prices = current_prices(conn, cabinet_id, [r.nm_id for r in rules])
    rows: list[tuple[object, ...]] = []
    changes = 0
    for rule in rules:
        if rule.nm_id not in prices:
            rows.append(
                (rule.nm_id, rule.id, None, None, None, None, None, None, "skipped", "WB lists no price for it")
            )
            continue
        d = decide(rule, *prices[rule.nm_id])
        if d.new_price is None:
            continue
        chunk = changes // PRICE_TASK_MAX_ITEMS
        changes += 1
        rows.append(
            (
                d.nm_id,
                d.rule_id,
                d.old_price,
                d.discount,
                d.new_price,
                d.old_selling,
                d.new_selling,
                chunk,
                "pending",
                d.reason,
            )
        )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO repricer_outcomes (cabinet_id, slot, nm_id, rule_id, old_price, discount, new_price,"
            " old_selling, new_selling, chunk_no, outcome, reason, run_id)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(cabinet_id, slot, *r, run_id) for r in rows],
        )


def apply_slot(
    conn: psycopg.Connection, client: WbClient, cabinet_id: str, slot: str, run_id: str | None
) -> dict[str, int]:
    """Upload the slot's pending changes chunk by chunk, each followed to WB's final status; returns
    counts by outcome."""
    chunks = conn.execute(
        "SELECT DISTINCT chunk_no FROM repricer_outcomes WHERE cabinet_id = %s AND slot = %s AND outcome = 'pending'"
        " ORDER BY 1",
        (cabinet_id, slot),
    ).fetchall()
    for (chunk_no,) in chunks:
        items = conn.execute(
            "SELECT nm_id, new_price, reason FROM repricer_outcomes WHERE cabinet_id = %s AND slot = %s"
            " AND chunk_no = %s AND outcome = 'pending' ORDER BY nm_id",
            (cabinet_id, slot, chunk_no),
        ).fetchall()
        outcome = send_chunk(
            conn,
            client,
            cabinet_id=cabinet_id,
            engine=ENGINE,
            intent_id=f"repricer:{cabinet_id}:{slot}:{chunk_no}",
            items=[PriceUpdate(nm_id=nm, price=price) for nm, price, _ in items],
            reason=f"repricer rules, slot {slot}: {len(items)} price(s)",
            run_id=run_id,
            why={nm: reason for nm, _, reason in items},
        )
        for nm, _, _ in items:
            error = outcome.item_error(nm)
            conn.execute(
                "UPDATE repricer_outcomes SET outcome = %s, error = %s, upload_id = %s, run_id = %s, updated_at = now()"
                " WHERE cabinet_id = %s AND slot = %s AND nm_id = %s",
                ("applied" if error is None else "refused", error, outcome.upload_id, run_id, cabinet_id, slot, nm),
            )
        conn.commit()
    rows = conn.execute(
        "SELECT outcome, count(*) FROM repricer_outcomes WHERE cabinet_id = %s AND slot = %s GROUP BY 1",
        (cabinet_id, slot),
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}
