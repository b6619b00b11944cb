"""Figures derived from a cabinet's orders: the sales funnel, ad statistics, stocks.

Definitions (they are what the truth reconciles against; the sales funnel follows WB's rule that
buyouts, cancellations and returns count on the day the order was *placed*):

- funnel ``orderCount`` of (product, day) = orders placed that Moscow day and visible in the orders
  feed by now, cancelled ones included; ``orderSum`` = their priceWithDisc summed, rounded to whole
  rubles (half up);
- ``cancelCount``/``cancelSum`` = those orders cancelled by now;
- ``buyoutCount``/``buyoutSum`` = those orders bought out by now and not returned;
- ``cartCount`` ≥ ``orderCount`` and ``openCount`` ≥ ``cartCount`` (drawn from the seed);
- ad ``orders`` of a product on a day, summed over every campaign and app, never exceed the
  funnel's ``orderCount`` for it (ad orders are drawn out of the real orders); "associated"
  products (``nms`` entries not in the campaign) have 0 views, clicks and spend;
- ad spend: CPM campaigns pay views × bid / 1000, CPC campaigns clicks × bid, in rubles with
  kopecks; the bid is the product's search bid in effect at the end of the day (its bid when the
  campaign started, until one is set through ``PATCH /api/advert/v1/bids``), and views grow with it,
  so an autobidder sees its changes in the next day's statistics.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from wb_simulator import catalogs
from wb_simulator.disorder import REVISE_AD_MAX, REVISE_AD_MIN
from wb_simulator.timefmt import DAY, day_number, day_start, dn_to_date
from wb_simulator.world import Cabinet, Campaign, rng_for

APPS = ((1, 0.2), (32, 0.5), (64, 0.3))  # site, Android, iOS: share of views


def rubles(kopecks: int) -> int:
    """Whole rubles, half up (the funnel's integer sums)."""
    return int((Decimal(kopecks) / 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


# -- the sales funnel ---------------------------------------------------------------------------


def funnel_counts(cab: Cabinet, dn: int, t: int) -> dict[int, dict[str, int]]:
    """nm_id → raw funnel figures of one Moscow day as of ``t`` (sums in kopecks)."""
    out: dict[int, dict[str, int]] = {}
    for o in cab.orders_of_day(dn, t):
        if o.lcd0 > t:
            continue
        f = out.get(o.product.nm_id)
        if f is None:
            f = out[o.product.nm_id] = dict.fromkeys(
                ("orders", "order_k", "cancels", "cancel_k", "buyouts", "buyout_k", "returns"), 0
            )
        f["orders"] += 1
        f["order_k"] += o.pwd_k
        if o.cancel_at is not None and o.cancel_at <= t:
            f["cancels"] += 1
            f["cancel_k"] += o.pwd_k
        elif o.sale_at is not None and o.sale_at <= t:
            if o.return_at is not None and o.return_at <= t:
                f["returns"] += 1
            else:
                f["buyouts"] += 1
                f["buyout_k"] += o.pwd_k
    for nm, f in out.items():
        rng = rng_for(cab.seed, "funnel", cab.id, nm, dn)
        f["carts"] = f["orders"] + int(rng.poisson(f["orders"] * 1.5 + 1))
        f["opens"] = f["carts"] + int(rng.poisson((f["carts"] + 1) * 5))
        f["wishlist"] = int(rng.poisson(f["opens"] * 0.03))
    return out


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(
        ("orders", "order_k", "cancels", "cancel_k", "buyouts", "buyout_k", "returns", "carts", "opens", "wishlist"), 0
    )


def funnel_period(cab: Cabinet, first_dn: int, last_dn: int, t: int) -> dict[int, dict[str, int]]:
    """nm_id → funnel figures summed over [first_dn, last_dn], for every product of the catalog."""
    total = {p.nm_id: empty_counts() for p in cab.products}
    for dn in range(first_dn, last_dn + 1):
        for nm, f in funnel_counts(cab, dn, t).items():
            acc = total.setdefault(nm, empty_counts())
            for k, v in f.items():
                acc[k] += v
    return total


def pct(part: int, whole: int) -> int:
    return int(part * 100 // whole) if whole else 0


def history_item(f: dict[str, int]) -> dict[str, int]:
    """Funnel figures under WB's names, as in a sales-funnel history item (without its date)."""
    return {
        "openCount": f["opens"],
        "cartCount": f["carts"],
        "orderCount": f["orders"],
        "orderSum": rubles(f["order_k"]),
        "buyoutCount": f["buyouts"],
        "buyoutSum": rubles(f["buyout_k"]),
        "buyoutPercent": pct(f["buyouts"], f["buyouts"] + f["cancels"] + f["returns"]),
        "addToCartConversion": pct(f["carts"], f["opens"]),
        "cartToOrderConversion": pct(f["orders"], f["carts"]),
        "addToWishlistCount": f["wishlist"],
    }


# -- advertising --------------------------------------------------------------------------------


def campaign_active(c: Campaign, dn: int) -> bool:
    if c.status not in (7, 9, 11) or c.start_dn is None:
        return False
    return c.start_dn <= dn and (c.end_dn is None or dn <= c.end_dn)


def ad_day(cab: Cabinet, dn: int, t: int) -> dict[int, dict[str, Any]]:
    """advert_id → that day's statistics (WB's ``days[]`` item) for every campaign active on it, as
    WB answers at ``t``: a day WB revised (``Disorder.revised_ad_days``) has every app's figures under
    the site's; a hand-made day (``Simulator.set_ad_day``) is what the test made."""
    cache = cab.ads_cache
    complete = day_start(dn + 1) + cab.feed_lag <= t
    if complete and dn in cache:
        return cache[dn]
    real = {nm: v[0] for nm, v in cab.nm_day_orders(dn, t).items()}
    price = {nm: (v[1] // v[0] if v[0] else 0) for nm, v in cab.nm_day_orders(dn, t).items()}
    out: dict[int, dict[str, Any]] = {}
    for c in cab.campaigns:
        if not campaign_active(c, dn):
            continue
        rng = rng_for(cab.seed, "ads", cab.id, c.advert_id, dn)
        apps = []
        per_app_nms: dict[int, list[dict[str, Any]]] = {app: [] for app, _ in APPS}
        for nm in c.nm_ids + c.associated:
            advertised = nm in c.nm_ids
            product = cab.by_nm[nm]
            left = real.get(nm, 0)
            ad_orders = int(rng.binomial(left, 0.25 if advertised else 0.1)) if left else 0
            real[nm] = left - ad_orders
            split = rng.multinomial(ad_orders, [share for _, share in APPS]) if ad_orders else [0, 0, 0]
            # A day's statistics follow the bid in effect at its end (a whole day at a changed bid).
            bid = c.bid_at(nm, day_start(dn + 1)) if advertised else 0
            for (app, share), app_orders in zip(APPS, split, strict=True):
                if advertised:
                    views = int(rng.poisson(400 * share * (1 + bid / 20_000)))
                    clicks = int(rng.binomial(views, 0.02 + 0.04 * rng.random())) if views else 0
                    atbs = int(rng.binomial(clicks, 0.15)) if clicks else 0
                    spend_k = round(views * bid / 1000) if c.payment_type == "cpm" else clicks * bid
                else:
                    views = clicks = atbs = spend_k = 0
                orders = int(app_orders)
                per_app_nms[app].append(
                    _metrics(
                        {"nmId": nm, "name": product.title},
                        views,
                        clicks,
                        atbs,
                        orders,
                        0,
                        spend_k,
                        orders * price.get(nm, product.discounted_kopecks),
                    )
                )
        for app, _ in APPS:
            nms = per_app_nms[app]
            app_row = _metrics({"appType": app}, *_sums(nms))
            app_row["nms"] = nms
            apps.append(app_row)
        if revised_at(cab, c, dn) <= t:
            apps = fold_apps(apps)
        day = _metrics({"date": f"{dn_to_date(dn).isoformat()}T00:00:00Z"}, *_sums(apps))
        day["apps"] = apps
        out[c.advert_id] = day
    for (advert_id, override_dn), item in cab.ad_overrides.items():
        if override_dn == dn:
            out[advert_id] = item
    if complete:
        cache[dn] = out
    return out


NEVER = 2**62


def revised_at(cab: Cabinet, c: Campaign, dn: int) -> int:
    """When WB revises the campaign's statistics of day ``dn`` (``Disorder.revised_ad_days``), else NEVER.
    A stream of its own: the statistics draw the same with or without the mode."""
    d = cab.spec.disorder
    if d is None or not d.revised_ad_days:
        return NEVER
    rng = rng_for(cab.seed, "disorder-ads", cab.id, c.advert_id, dn)
    if rng.random() >= d.revised_ad_days:
        return NEVER
    return day_start(dn + 1) + int(rng.integers(REVISE_AD_MIN, REVISE_AD_MAX))


def fold_apps(apps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A revised day: every app's products' figures summed under the first app's (the site's); the
    other apps' rows are gone. The day's totals stay what they were."""
    by_nm: dict[int, list[Any]] = {}
    for app in apps:
        for nm in app["nms"]:
            acc = by_nm.setdefault(nm["nmId"], [nm["name"], 0, 0, 0, 0, 0, 0, 0])
            for i, key in enumerate(("views", "clicks", "atbs", "orders", "canceled", "_sum_k", "_price_k"), 1):
                acc[i] += nm[key]
    nms = [_metrics({"nmId": nm, "name": acc[0]}, *acc[1:]) for nm, acc in by_nm.items()]
    row = _metrics({"appType": APPS[0][0]}, *_sums(nms))
    row["nms"] = nms
    return [row]


def kopecks(rubles_value: Any) -> int:
    """Rubles (a number or its text) as whole kopecks."""
    return int(Decimal(str(rubles_value)) * 100)


def ad_day_item(dn: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A hand-made ``days[]`` item of fullstats: ``rows`` are {appType, nmId, views, clicks, atbs,
    orders, sum, sum_price} (money in rubles; counters default to 0), grouped by app in their order."""
    per_app: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        nm = _metrics(
            {"nmId": int(r["nmId"]), "name": str(r.get("name", ""))},
            int(r.get("views", 0)),
            int(r.get("clicks", 0)),
            int(r.get("atbs", 0)),
            int(r.get("orders", 0)),
            0,
            kopecks(r.get("sum", 0)),
            kopecks(r.get("sum_price", 0)),
        )
        per_app.setdefault(int(r["appType"]), []).append(nm)
    apps = []
    for app, nms in per_app.items():
        row = _metrics({"appType": app}, *_sums(nms))
        row["nms"] = nms
        apps.append(row)
    day = _metrics({"date": f"{dn_to_date(dn).isoformat()}T00:00:00Z"}, *_sums(apps))
    day["apps"] = apps
    return day


def _sums(rows: list[dict[str, Any]]) -> tuple[int, int, int, int, int, int, int]:
    views = sum(r["views"] for r in rows)
    clicks = sum(r["clicks"] for r in rows)
    atbs = sum(r["atbs"] for r in rows)
    orders = sum(r["orders"] for r in rows)
    canceled = sum(r["canceled"] for r in rows)
    spend_k = sum(r["_sum_k"] for r in rows)
    price_k = sum(r["_price_k"] for r in rows)
    return views, clicks, atbs, orders, canceled, spend_k, price_k


def _metrics(
    head: dict[str, Any], views: int, clicks: int, atbs: int, orders: int, canceled: int, spend_k: int, price_k: int
) -> dict[str, Any]:
    row = dict(head)
    row.update(
        views=views,
        clicks=clicks,
        ctr=round(clicks * 100 / views, 2) if views else 0,
        cpc=round(spend_k / 100 / clicks, 2) if clicks else 0,
        cr=round(orders * 100 / clicks, 2) if clicks else 0,
        atbs=atbs,
        orders=orders,
        shks=orders,
        canceled=canceled,
        sum=spend_k / 100,
        sum_price=price_k / 100,
        _sum_k=spend_k,
        _price_k=price_k,
    )
    return row


def strip_private(value: Any) -> Any:
    """Drop the exact-kopeck helper keys (``_sum_k``…) before a row leaves the simulator."""
    if isinstance(value, dict):
        return {k: strip_private(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [strip_private(v) for v in value]
    return value


def fullstats(cab: Cabinet, c: Campaign, first_dn: int, last_dn: int, t: int) -> dict[str, Any] | None:
    days = [ad_day(cab, dn, t)[c.advert_id] for dn in range(first_dn, last_dn + 1) if campaign_active(c, dn)]
    if not days:
        return None
    row = _metrics({"advertId": c.advert_id}, *_sums(days))
    row["currency"] = "RUB"
    row["boosterStats"] = []
    row["days"] = days
    return row


# -- stocks -------------------------------------------------------------------------------------


def stocks(cab: Cabinet, t: int) -> list[dict[str, Any]]:
    """One row per (product size, WB warehouse holding it): quantity on hand and in transit at ``t``."""
    today = day_number(t)
    sold: dict[tuple[int, int], int] = {}
    to_client: dict[tuple[int, int], int] = {}
    from_client: dict[tuple[int, int], int] = {}
    for dn in range(today - 7, today + 1):
        for o in cab.orders_of_day(dn, t):
            if o.lcd0 > t:
                continue
            key = (o.size.chrt_id, o.warehouse)
            sold[key] = sold.get(key, 0) + 1
            in_transit = (o.cancel_at is None or o.cancel_at > t) and (o.sale_at is None or o.sale_at > t)
            if in_transit:
                to_client[key] = to_client.get(key, 0) + 1
    for o, kind in cab.sales_between(t - 3 * DAY, t + 1, t):
        if kind == 1:
            key = (o.size.chrt_id, o.warehouse)
            from_client[key] = from_client.get(key, 0) + 1
    rows = []
    for p in cab.products:
        rng = rng_for(cab.seed, "stock", cab.id, p.nm_id)
        held = sorted(int(i) for i in rng.choice(len(catalogs.STOCK_WAREHOUSES), size=3, replace=False))
        for size in p.sizes:
            for w in held:
                key = (size.chrt_id, w)
                base = int(rng.integers(20, 300))
                wh_id, wh_name = catalogs.STOCK_WAREHOUSES[w]
                rows.append(
                    {
                        "nmId": p.nm_id,
                        "chrtId": size.chrt_id,
                        "warehouseId": wh_id,
                        "warehouseName": wh_name,
                        "regionName": "Центральный" if w < 3 else "Южный",
                        "quantity": max(0, base - sold.get(key, 0)),
                        "inWayToClient": to_client.get(key, 0),
                        "inWayFromClient": from_client.get(key, 0),
                    }
                )
    return rows
