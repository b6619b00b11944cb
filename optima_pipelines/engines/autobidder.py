"""The autobidder's bid engine: a seller's rule, the latest ad statistics, and the bid it sets on WB.

**The rule, in words** (``decide``, pure): over the last ``lookback_days`` days of statistics the
campaign has for the product, compute the metric the rule targets:

- target CPO: ad spend / ad orders (rubles per order);
- target ДРР: ad spend / value of ad orders × 100 (% of revenue spent on ads).

If the metric is within ``tolerance_percent`` of the target, keep the bid. If it is over the target,
lower the bid in proportion to the gap, closing half of it (new bid = bid × (1 + (target / metric
− 1) / 2)), by at most ``max_step_percent``; under the target, raise it the same way, unless the last day's spend already
reached the daily budget. Spend with no order at all counts as over the target (lower by the largest
step); no spend and no order is no evidence (keep). The result is always clamped to
[max(rule minimum, WB's minimum bid), rule maximum]: a bid outside those bounds is brought back
even without new statistics. A rule acts once per new statistics (never twice on the same numbers)
and at most once per ``min_change_interval_minutes``; nothing is sent to WB when the bid would not
change.

**Where it runs**: ``due_cabinets`` (read-only SQL and the pure rule) tells the 60-s sensor which
cabinets have a bid to change; the run of such a cabinet (``apply_bids``) reads WB's minimum bids,
decides again, and sends every change of the cabinet in one ``PATCH /api/advert/v1/bids``, each
change recorded in ``engine_actions`` first with an intent id (never sent twice).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import psycopg

from optima_pipelines.db.connection import Connect
from optima_pipelines.db.statements import upsert
from optima_pipelines.engines.audit import begin_action, finish_action
from optima_pipelines.wb import BidUpdate, WbAuthError, WbClient, WbDeferred, WbError

ENGINE = "autobidder"
STRATEGIES = ("target_cpo", "target_drr")
#: WB's minimum bids are read again after this long.
WB_MIN_TTL = timedelta(hours=1)
#: The minimum-bid placement type of a rule's placement (WB names it in the singular).
MIN_BID_TYPE = {"combined": "combined", "search": "search", "recommendations": "recommendation"}


@dataclass(frozen=True)
class Rule:
    strategy: str  # target_cpo | target_drr
    target: Decimal  # rubles per ad order, or percent
    min_bid: int  # kopecks
    max_bid: int
    max_step_percent: Decimal = Decimal(20)
    tolerance_percent: Decimal = Decimal(5)
    daily_budget_rub: Decimal | None = None


@dataclass(frozen=True)
class Evidence:
    """The statistics of the look-back window (rubles, counts)."""

    spend: Decimal
    orders: int
    revenue: Decimal
    last_day_spend: Decimal = Decimal(0)


@dataclass(frozen=True)
class Decision:
    bid: int
    kind: str  # raise | lower | hold | clamp | blocked
    reason: str
    metric: Decimal | None = None


def _rub(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01'), ROUND_HALF_UP)} ₽"


def _metric_name(rule: Rule) -> str:
    return "CPO" if rule.strategy == "target_cpo" else "ДРР"


def _show(rule: Rule, value: Decimal) -> str:
    return _rub(value) if rule.strategy == "target_cpo" else f"{value.quantize(Decimal('0.1'), ROUND_HALF_UP)} %"


def metric(rule: Rule, evidence: Evidence) -> Decimal | None:
    """CPO (rubles per ad order) or ДРР (%); None when there are no orders (or no order value)."""
    if rule.strategy == "target_cpo":
        return evidence.spend / evidence.orders if evidence.orders > 0 else None
    return evidence.spend * 100 / evidence.revenue if evidence.revenue > 0 else None


def decide(rule: Rule, current_bid: int, evidence: Evidence | None, wb_min: int | None = None) -> Decision:
    """The bid the rule wants now (kopecks), with the reason in words a seller reads. Pure."""
    if rule.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {rule.strategy!r}")
    floor = max(rule.min_bid, wb_min or 0)
    ceiling = rule.max_bid
    if floor > ceiling:
        return Decision(
            current_bid,
            "blocked",
            f"WB's minimum bid {wb_min} kopecks is above the rule's maximum {ceiling}: the rule cannot be applied",
        )

    def clamp(bid: int) -> int:
        return min(max(bid, floor), ceiling)

    def hold(reason: str, value: Decimal | None = None) -> Decision:
        bid = clamp(current_bid)
        if bid != current_bid:
            side = "minimum" if bid == floor else "maximum"
            return Decision(
                bid, "clamp", f"{reason}; the bid {current_bid} is outside the bounds, set to the {side}", value
            )
        return Decision(bid, "hold", reason, value)

    name = _metric_name(rule)
    target = _show(rule, rule.target)
    step = rule.max_step_percent / 100
    if evidence is None or (evidence.spend <= 0 and evidence.orders <= 0):
        return hold("no ad statistics yet: bid kept")
    value = metric(rule, evidence)
    if value is None:
        if evidence.spend <= 0:
            return hold("no spend: bid kept")
        if rule.strategy == "target_cpo" and evidence.spend < rule.target:
            return hold(f"spent {_rub(evidence.spend)} with no order yet, below one target {name} {target}: bid kept")
        factor = 1 - step
        reason = (
            f"spent {_rub(evidence.spend)} with no ad order (target {name} {target}): lower by {rule.max_step_percent}%"
        )
        kind = "lower"
    else:
        gap = (value - rule.target) / rule.target
        if abs(gap) * 100 <= rule.tolerance_percent:
            return hold(
                f"{name} {_show(rule, value)} is within {rule.tolerance_percent}% of the target {target}", value
            )
        # Half-way to the bid that would meet the target if the metric were proportional to the bid:
        # one day's noise moves the bid half as much, and a metric steeper than the bid does not overshoot.
        factor = min(max(1 + (rule.target / value - 1) / 2, 1 - step), 1 + step)
        if gap > 0:
            kind = "lower"
            reason = f"{name} {_show(rule, value)} is above the target {target}"
        else:
            if rule.daily_budget_rub is not None and evidence.last_day_spend >= rule.daily_budget_rub:
                return hold(
                    f"{name} {_show(rule, value)} is below the target {target}, but the last day's spend "
                    f"{_rub(evidence.last_day_spend)} reached the daily budget {_rub(rule.daily_budget_rub)}: bid kept",
                    value,
                )
            kind = "raise"
            reason = f"{name} {_show(rule, value)} is below the target {target}"
    wanted = int((Decimal(current_bid) * factor).to_integral_value(ROUND_HALF_UP))
    bid = clamp(wanted)
    if bid == current_bid:
        edge = "maximum" if kind == "raise" else "minimum"
        return Decision(bid, "hold", f"{reason}, but the bid is already at its {edge} {bid} kopecks", value)
    reason += f": {current_bid} → {bid} kopecks"
    if bid != wanted:
        reason += f" (bounded by {'the maximum' if bid == ceiling else 'the minimum'})"
    return Decision(bid, kind, reason, value)


# -- the warehouse side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleView:
    """A rule with what the engine knows: current bid, evidence, its own last decision."""

    id: int
    cabinet_id: str
    advert_id: int
    nm_id: int
    placement: str
    payment_type: str | None
    rule: Rule
    min_change_interval: timedelta
    current_bid: int | None
    evidence: Evidence | None
    stats_loaded_at: datetime | None  # newest statistics row of the window
    decided_stats_at: datetime | None  # what the last decision used
    set_at: datetime | None
    wb_min: int | None
    wb_min_checked_at: datetime | None
    #: WB refused the rule's last bid and no statistics came since: nothing to send until they do.
    refused: bool = False

    @property
    def target(self) -> str:
        return f"{self.advert_id}:{self.nm_id}:{self.placement}"

    def new_evidence(self) -> bool:
        return self.stats_loaded_at is not None and (
            self.decided_stats_at is None or self.stats_loaded_at > self.decided_stats_at
        )

    def may_change(self, now: datetime) -> bool:
        return self.set_at is None or now - self.set_at >= self.min_change_interval

    def wants(self, now: datetime) -> Decision | None:
        """The change this rule wants now, or None (no bid known, no change, or not yet allowed)."""
        if self.current_bid is None or self.refused:
            return None
        decision = decide(self.rule, self.current_bid, self.evidence, self.wb_min)
        if decision.bid == self.current_bid:
            return None
        floor = max(self.rule.min_bid, self.wb_min or 0)
        if decision.kind == "clamp" or not floor <= self.current_bid <= self.rule.max_bid:
            return decision  # out of bounds: brought back whatever the statistics and the interval
        return decision if self.new_evidence() and self.may_change(now) else None


RULES_SQL = """
SELECT r.id, r.cabinet_id, r.advert_id, r.nm_id, r.placement, c.payment_type,
       r.strategy, r.target, r.min_bid_kopecks, r.max_bid_kopecks, r.max_step_percent, r.tolerance_percent,
       r.daily_budget_rub, r.min_change_interval_minutes,
       CASE WHEN s.set_at IS NOT NULL AND (p.synced_at IS NULL OR s.set_at >= p.synced_at) THEN s.bid_kopecks
            WHEN r.placement = 'recommendations' THEN p.bid_recommendations_kopecks
            ELSE p.bid_search_kopecks END AS current_bid,
       ev.spend, ev.orders, ev.revenue, ev.last_day_spend, ev.loaded_at,
       s.stats_loaded_at, s.set_at, s.wb_min_bid_kopecks, s.wb_min_checked_at,
       coalesce(s.decision LIKE 'WB refused%%' AND s.stats_loaded_at >= ev.loaded_at, false) AS refused
FROM autobidder_rules r
JOIN cabinets cab ON cab.id = r.cabinet_id AND cab.status = 'active'
LEFT JOIN autobidder_state s ON s.rule_id = r.id
LEFT JOIN ad_campaigns c ON c.cabinet_id = r.cabinet_id AND c.advert_id = r.advert_id
LEFT JOIN ad_campaign_products p ON p.cabinet_id = r.cabinet_id AND p.advert_id = r.advert_id AND p.nm_id = r.nm_id
LEFT JOIN LATERAL (
    SELECT sum(st.sum) AS spend, sum(st.orders) AS orders, sum(st.sum_price) AS revenue,
           coalesce(sum(st.sum) FILTER (WHERE st.day = d.last_day), 0) AS last_day_spend,
           max(st.loaded_at) AS loaded_at
    FROM (SELECT max(x.day) AS last_day FROM ad_campaign_stats x
          WHERE x.cabinet_id = r.cabinet_id AND x.advert_id = r.advert_id AND x.nm_id = r.nm_id) d
    JOIN ad_campaign_stats st ON st.cabinet_id = r.cabinet_id AND st.advert_id = r.advert_id
         AND st.nm_id = r.nm_id AND st.day > d.last_day - r.lookback_days AND st.day <= d.last_day
) ev ON true
WHERE r.enabled AND (%(cabinets)s::text[] IS NULL OR r.cabinet_id = ANY(%(cabinets)s))
ORDER BY r.cabinet_id, r.id
"""


def load_rules(conn: psycopg.Connection, cabinets: Sequence[str] | None = None) -> list[RuleView]:
    """The enabled rules of active cabinets (all, or of ``cabinets``) with their evidence: one query."""
    rows = conn.execute(RULES_SQL, {"cabinets": list(cabinets) if cabinets is not None else None}).fetchall()
    out = []
    for r in rows:
        rule = Rule(
            strategy=r[6],
            target=Decimal(r[7]),
            min_bid=int(r[8]),
            max_bid=int(r[9]),
            max_step_percent=Decimal(r[10]),
            tolerance_percent=Decimal(r[11]),
            daily_budget_rub=Decimal(r[12]) if r[12] is not None else None,
        )
        evidence = (
            Evidence(spend=Decimal(r[15]), orders=int(r[16]), revenue=Decimal(r[17]), last_day_spend=Decimal(r[18]))
            if r[15] is not None
            else None
        )
        out.append(
            RuleView(
                id=r[0],
                cabinet_id=r[1],
                advert_id=r[2],
                nm_id=r[3],
                placement=r[4],
                payment_type=r[5],
                rule=rule,
                min_change_interval=timedelta(minutes=int(r[13])),
                current_bid=int(r[14]) if r[14] is not None else None,
                evidence=evidence,
                stats_loaded_at=r[19],
                decided_stats_at=r[20],
                set_at=r[21],
                wb_min=r[22],
                wb_min_checked_at=r[23],
                refused=bool(r[24]),
            )
        )
    return out


def due_cabinets(conn: psycopg.Connection, now: datetime) -> dict[str, int]:
    """cabinet → how many of its bids the rules would change now (what the sensor launches runs for)."""
    out: dict[str, int] = {}
    for view in load_rules(conn):
        if view.wants(now) is not None:
            out[view.cabinet_id] = out.get(view.cabinet_id, 0) + 1
    return out


def _save_state(conn: psycopg.Connection, rule_id: int, **values: Any) -> None:
    upsert(conn, "autobidder_state", {"rule_id": rule_id}, values)


def _refresh_wb_minimums(
    conn: psycopg.Connection, client: WbClient, views: list[RuleView], now: datetime
) -> list[RuleView]:
    """WB's minimum bids of the rules whose stored minimum is older than WB_MIN_TTL (one request a campaign)."""
    stale = [v for v in views if v.wb_min_checked_at is None or now - v.wb_min_checked_at >= WB_MIN_TTL]
    by_advert: dict[tuple[int, str], list[RuleView]] = {}
    for v in stale:
        by_advert.setdefault((v.advert_id, v.payment_type or "cpm"), []).append(v)
    fresh: dict[int, int | None] = {}
    for (advert_id, payment_type), group in by_advert.items():
        types = sorted({MIN_BID_TYPE[v.placement] for v in group})
        minimums = client.min_bids(
            advert_id, [v.nm_id for v in group], payment_type=payment_type, placement_types=types
        )
        for v in group:
            values = [b.value for b in minimums.get(v.nm_id, []) if b.type == MIN_BID_TYPE[v.placement]]
            fresh[v.id] = max(values) if values else None
            _save_state(conn, v.id, wb_min_bid_kopecks=fresh[v.id], wb_min_checked_at=now)
    return [replace(v, wb_min=fresh[v.id], wb_min_checked_at=now) if v.id in fresh else v for v in views]


@dataclass
class BidRun:
    """What one run of a cabinet did."""

    changed: list[tuple[str, int, int]]  # (target, from, to)
    kept: int = 0
    already_sent: int = 0
    refused: list[str] = field(default_factory=list)  # bids WB refused, with its reason

    def summary(self) -> dict[str, Any]:
        return {
            "bids_changed": len(self.changed),
            "bids_kept": self.kept,
            "already_sent": self.already_sent,
            "refused": self.refused,
            "changes": [f"{t}: {a} → {b}" for t, a, b in self.changed],
        }


def _intent(view: RuleView, new_bid: int) -> str:
    evidence = view.stats_loaded_at.isoformat() if view.stats_loaded_at else "none"
    return f"bid:{view.target}:{view.current_bid}->{new_bid}:{evidence}"


def _pending_intents(conn: psycopg.Connection, cabinet_id: str, intents: Iterable[str]) -> set[str]:
    rows = conn.execute(
        "SELECT intent_id FROM engine_actions WHERE cabinet_id = %s AND engine = %s AND intent_id = ANY(%s)"
        " AND status <> 'ok'",
        (cabinet_id, ENGINE, list(intents)),
    ).fetchall()
    return {r[0] for r in rows}


def _bids_on_wb(client: WbClient, views: Iterable[RuleView]) -> dict[tuple[int, int, str], int]:
    current: dict[tuple[int, int, str], int] = {}
    for campaign in client.list_campaigns({v.advert_id for v in views}):
        for p in campaign.products:
            current[(campaign.id, p.nm_id, "search")] = p.bids_kopecks.search
            current[(campaign.id, p.nm_id, "combined")] = p.bids_kopecks.search
            current[(campaign.id, p.nm_id, "recommendations")] = p.bids_kopecks.recommendations
    return current


def _update(v: RuleView, d: Decision) -> BidUpdate:
    return BidUpdate(advert_id=v.advert_id, nm_id=v.nm_id, bid_kopecks=d.bid, placement=v.placement)


def _record_failure(
    conn: psycopg.Connection, items: Sequence[tuple[RuleView, Decision, int]], exc: WbError, now: datetime
) -> None:
    error = {"error": str(exc), "deferred": isinstance(exc, WbDeferred)}
    for v, _, action_id in items:
        finish_action(conn, action_id, "failed", error)
        if exc.is_transient:
            _save_state(conn, v.id, last_error=str(exc))
        else:  # WB refused this bid: wait for new statistics rather than ask again every minute
            refusal = f"WB refused the bid: {exc}"
            _save_state(
                conn, v.id, last_error=str(exc), stats_loaded_at=v.stats_loaded_at, decided_at=now, decision=refusal
            )


def _record_success(
    conn: psycopg.Connection,
    items: Sequence[tuple[RuleView, Decision, int]],
    confirmed: Sequence[BidUpdate],
    now: datetime,
    result: BidRun,
) -> None:
    echo = {(b.advert_id, b.nm_id, b.placement): b.bid_kopecks for b in confirmed}
    for v, d, action_id in items:
        answer = {"bid_kopecks": echo.get((v.advert_id, v.nm_id, v.placement), d.bid), "placement": v.placement}
        finish_action(conn, action_id, "ok", answer)
        _save_state(
            conn,
            v.id,
            bid_kopecks=d.bid,
            set_at=now,
            stats_loaded_at=v.stats_loaded_at,
            decided_at=now,
            decision=d.reason,
            last_error=None,
        )
        result.changed.append((v.target, v.current_bid or 0, d.bid))


def apply_bids(
    connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, now: datetime | None = None
) -> BidRun:
    """Decide every rule of the cabinet and set the bids that change, each recorded before it is sent.

    A change whose intent is already recorded ``ok`` is not sent again; one left ``pending`` or
    ``failed`` by an earlier attempt is first checked against WB's current bids. A transient WB
    error (or a refused token) marks the attempted changes failed (with WB's answer) and is raised:
    the run's retry sends them again under the same intents. When WB refuses the request (400),
    each bid is sent on its own, so that one refused bid does not hold back the others; a refused
    bid is recorded failed with WB's reason and waits for new statistics."""
    with connect() as conn:
        now = now or conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        views = [v for v in load_rules(conn, [cabinet_id]) if v.current_bid is not None]
        candidates = [v for v in views if v.wants(now) is not None]
        result = BidRun(changed=[], kept=len(views) - len(candidates))
        if not candidates:
            return result
        candidates = _refresh_wb_minimums(conn, client, candidates, now)
        conn.commit()
        planned: list[tuple[RuleView, Decision, str]] = []
        for v in candidates:
            decision = v.wants(now)  # again, with WB's minimum now known
            if decision is None:
                result.kept += 1
                _save_state(
                    conn, v.id, decided_at=now, stats_loaded_at=v.stats_loaded_at, decision="kept (WB's minimum)"
                )
                continue
            planned.append((v, decision, _intent(v, decision.bid)))
        if not planned:
            conn.commit()
            return result
        retried = _pending_intents(conn, cabinet_id, [i for _, _, i in planned])
        on_wb = _bids_on_wb(client, [v for v, _, i in planned if i in retried]) if retried else {}
        to_send: list[tuple[RuleView, Decision, int]] = []
        for v, decision, intent in planned:
            action_id = begin_action(
                conn,
                cabinet_id=cabinet_id,
                engine=ENGINE,
                action="set_bid",
                target=v.target,
                reason=decision.reason,
                request={
                    "advert_id": v.advert_id,
                    "nm_id": v.nm_id,
                    "placement": v.placement,
                    "from_kopecks": v.current_bid,
                    "bid_kopecks": decision.bid,
                },
                intent_id=intent,
                run_id=run_id,
            )
            if action_id is not None and on_wb.get((v.advert_id, v.nm_id, v.placement)) == decision.bid:
                finish_action(conn, action_id, "ok", {"already_on_wb": True, "bid_kopecks": decision.bid})
                action_id = None  # WB holds it already: nothing to send
            if action_id is None:  # sent and confirmed, by an earlier attempt or found on WB
                result.already_sent += 1
                _save_state(
                    conn,
                    v.id,
                    bid_kopecks=decision.bid,
                    set_at=now,
                    stats_loaded_at=v.stats_loaded_at,
                    decided_at=now,
                    decision=decision.reason,
                    last_error=None,
                )
                continue
            to_send.append((v, decision, action_id))
        conn.commit()  # the intents are on record before the call
        if not to_send:
            return result
        batches = [to_send]
        while batches:
            batch = batches.pop(0)
            try:
                confirmed = client.set_bids([_update(v, d) for v, d, _ in batch])
            except WbError as exc:
                if not exc.is_transient and not isinstance(exc, WbAuthError) and len(batch) > 1:
                    # WB refused the request: find the bid it refuses, sending each on its own.
                    batches = [[item] for item in batch] + batches
                    continue
                if exc.is_transient or isinstance(exc, WbAuthError):
                    # This batch and those not sent yet: the retry (or the next tick) sends them
                    # again under the same intents.
                    _record_failure(conn, [*batch, *(item for b in batches for item in b)], exc, now)
                    conn.commit()
                    raise
                _record_failure(conn, batch, exc, now)
                conn.commit()
                result.refused.append(f"{batch[0][0].target}: {exc}")
                continue
            _record_success(conn, batch, confirmed, now, result)
            conn.commit()
    return result
