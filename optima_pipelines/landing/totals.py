"""What WB last said about a (cabinet, day), from the landing: the ad spend and the payout the
mart's checks compare rnp_daily with (assets/rnp.py), not only the tables the mart was built from.

- ad spend: the ``sum`` of every (campaign, app, product) of the day in the LAST fullstats answer
  that covered it (WB revises its statistics: a later answer replaces an earlier one);
- payout: the signed ``forPay`` (a return, ``Возврат``, counts negative) of the LAST version of every
  report line (by ``rrdId``) attributed to the day: its order's Moscow day (the warehouse's
  ``wb_orders``), else its own day, as rnp_daily's payout is.

A day no landed answer covers is None (nothing to compare with).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import msgspec
import psycopg
import pyarrow.compute as pc

from optima_pipelines.landing.store import Landing
from optima_pipelines.logs import get_logger
from optima_pipelines.wb.models.advertising import _StatsCampaign, ad_stats_from
from optima_pipelines.wb.models.finance import ReportLine

log = get_logger(__name__)

FULLSTATS_PATH = "/adv/v3/fullstats"
REPORT_PATH = "/api/finance/v1/sales-reports/detailed"
#: How long after a day its statistics may still be asked for (the ads window: 31 days at most) and
#: its report lines come (the finance report of the order's day comes weeks later).
ADS_LAG = timedelta(days=31)
FINANCE_LAG = timedelta(days=120)
RETURN = "Возврат"


@dataclass(frozen=True)
class WbSaid:
    ad_spend: Decimal | None = None
    payout: Decimal | None = None


def _decode(path: str, answer: bytes, model: Any) -> Any:
    """The answer's rows; None for an answer WB sent broken (truncated, or a row of bad values): its
    page was not merged as it came, so it is not WB's last word either (the sync's own screening
    decides what of it was stored)."""
    if not answer:  # WB's 204 (the end of the finance report): nothing
        return []
    try:
        return msgspec.json.decode(answer, type=model)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("a landed answer of %s does not decode (%s): left out of what WB last said", path, exc)
        return None


def last_said(
    landing: Landing, conn: psycopg.Connection | None, pairs: Iterable[tuple[str, date]]
) -> dict[tuple[str, date], WbSaid]:
    """WB's last word on each pair's ad spend and payout (None where nothing landed covers it).
    ``conn`` (the warehouse) places report lines on their orders' days; without it, on their own."""
    wanted = sorted(set(pairs))
    if not wanted:
        return {}
    by_cabinet: dict[str, set[date]] = defaultdict(set)
    for cabinet, day in wanted:
        by_cabinet[cabinet].add(day)
    out: dict[tuple[str, date], WbSaid] = {}
    for cabinet, days in by_cabinet.items():
        spend = _ad_spend(landing, cabinet, days)
        payout = _payout(landing, conn, cabinet, days)
        for day in days:
            out[(cabinet, day)] = WbSaid(spend.get(day), payout.get(day))
    return out


def _ad_spend(landing: Landing, cabinet: str, days: set[date]) -> dict[date, Decimal]:
    answers = landing.read(cabinet, min(days), max(days) + ADS_LAG, ["ads"])
    latest: dict[tuple[int, date, int, int], Decimal] = {}
    covered: set[date] = set()
    for row in answers.filter(pc.equal(answers["path"], FULLSTATS_PATH)).to_pylist():  # arrival order
        stats = _decode(FULLSTATS_PATH, row["answer"], list[_StatsCampaign])
        if stats is None:
            continue
        params = msgspec.json.decode(row["params"] or b"{}") if row["params"] else {}
        begin, end = params.get("beginDate"), params.get("endDate")
        if begin and end:
            first, last = date.fromisoformat(begin), date.fromisoformat(end)
            asked = {d for d in days if first <= d <= last}
            ids = {int(i) for i in str(params.get("ids") or "").split(",") if i.strip().isdigit()}
            covered |= asked
            # An answer that no longer lists a product of its campaigns' day says it spent nothing there.
            for key in [k for k in latest if k[1] in asked and k[0] in ids]:
                del latest[key]
        for stat in ad_stats_from(stats):
            if stat.day in days:
                latest[(stat.advert_id, stat.day, stat.app_type, stat.nm_id)] = stat.sum
    spend: dict[date, Decimal] = dict.fromkeys(covered, Decimal(0))
    for (_, day, _, _), value in latest.items():
        spend[day] = spend.get(day, Decimal(0)) + value
    return spend


def _payout(landing: Landing, conn: psycopg.Connection | None, cabinet: str, days: set[date]) -> dict[date, Decimal]:
    answers = landing.read(cabinet, min(days) - FINANCE_LAG, max(days) + FINANCE_LAG, ["finance"])
    lines: dict[int, ReportLine] = {}
    for row in answers.filter(pc.equal(answers["path"], REPORT_PATH)).to_pylist():
        for line in _decode(REPORT_PATH, row["answer"], list[ReportLine]) or ():
            lines[line.rrd_id] = line
    if not lines:
        return {}
    order_days: dict[str, date] = {}
    if conn is not None:
        srids = sorted({line.srid for line in lines.values() if line.srid})
        order_days = dict(
            conn.execute(
                "SELECT srid, day FROM wb_orders WHERE cabinet_id = %s AND srid = ANY(%s)", (cabinet, srids)
            ).fetchall()
        )
    payout: dict[date, Decimal] = {}
    for line in lines.values():
        day = order_days.get(line.srid, line.day)
        if day in days:
            sign = -1 if line.doc_type_name == RETURN else 1
            payout[day] = payout.get(day, Decimal(0)) + sign * (line.for_pay or Decimal(0))
    return payout
