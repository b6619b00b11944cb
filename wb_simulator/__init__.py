"""A local simulator of the Wildberries seller API, for tests and the demo. Never imported by production code.

It serves, over real HTTP, the WB methods Optima's client calls, with the shapes of WB's own OpenAPI
files (vendored in ``wb_simulator/openapi/``), each WB category under a path prefix: ``{base}/{category}{wb path}``
with categories ``statistics``, ``finance``, ``advert``, ``analytics``, ``content``, ``prices``,
``feedbacks``, ``common``, ``supplies`` (statistics-api, finance-api, advert-api,
seller-analytics-api, content-api, discounts-prices-api, feedbacks-api, common-api, supplies-api),
and ``GET /ping`` on each. Example: ``{base}/statistics/api/v1/supplier/orders?dateFrom=…&flag=0``.

Quick start::

    from datetime import datetime, timedelta
    from wb_simulator import CabinetSpec, Simulator, serve

    sim = Simulator(seed=7, cabinets=[CabinetSpec(id="c1", products=40, orders_per_day=300)],
                    time_scale=60, now=datetime(2026, 8, 20, 12, 0))
    token = sim.token("c1")                       # every category; see token() for the rest
    with serve(sim) as base_url:                  # uvicorn on a free port, ready on return
        ...                                       # GET {base_url}/statistics/api/v1/supplier/orders
        sim.advance(timedelta(hours=6))           # new orders; older ones cancelled, sold, returned
        sim.truth.orders("c1")                    # what the feed holds now, in WB's JSON shape

**Data.** Everything follows from ``seed`` and the cabinet specs: products (nm_id, vendor code,
brand, subject, sizes with chrtID and barcodes, prices), orders over ``history_days`` with daily and
weekly patterns, each drawn with its fate (cancelled, or bought out and maybe returned, maybe a
feedback), ad campaigns, questions, news, warehouse slots. What the API shows at simulated time T is
what has happened by T, so moving the clock makes old orders change: a cancellation moves an order's
``lastChangeDate`` to that moment and an incremental (``flag=0``) sync sees it again; a buyout or a
return adds a sales row (``S…``/``R…``, same ``srid``). The finance report is written day by day
(see ``wb_simulator.finance``), the funnel and ad statistics are computed from the orders (see
``wb_simulator.views`` for the definitions that reconcile).

**Paging** is WB's: statistics ``flag=0`` returns rows with lastChangeDate ≥ dateFrom, ~80,000 a
page (never ending inside a group of rows changed at the same second), the boundary rows again at
the top of the next page, and ``[]`` once only those are left; ``flag=1`` one Moscow day by
``date``; rows kept 90 days. The finance report pages by ``rrdId`` and ends with 204; cards by the
``{updatedAt, nmID}`` cursor; goods, funnel, stocks by offset; feedbacks/questions by skip/take.

**Clock.** ``Simulator(now=datetime)`` pins simulated time there (only ``advance`` moves it): the
same seed and ``now`` give the same answers. Without ``now`` simulated time follows real time
(the CLI). ``sim.now()``, ``sim.advance(timedelta)``.

**Rate limits** are WB's (wb-api.md §1.6) per (seller, token type, limit group), with WB's 429 body
and ``X-Ratelimit-*`` headers. ``time_scale`` makes their clock run that many times faster than real
time; the headers still speak WB's seconds (a client configured with the same scale divides them).
``sim.penalize(cabinet_id, "statistics.orders" | "advert", seconds)`` forces 429s for a while.

**Tokens.** ``sim.token(cabinet_id, categories=None, token_type="personal", expired=False,
read_only=False)`` issues a JWT like WB's (``acc``, ``s`` category bits, ``sid``, ``exp``, ``id``);
``sim.revoke(token)``. Missing, foreign, edited, revoked, expired or wrong-category tokens get WB's
401 bodies ("token is malformed", "token expired", "token scope not allowed").

**Faults.** ``sim.faults.set("GET statistics/api/v1/supplier/orders", error_rate=0.3, rate_429=0.1,
latency_s=…, latency_spike_rate=…, truncate=…, malformed=…, wrong_types=…, empty_204=…, times=…)``,
``sim.faults.clear()``; seeded, so a storm is reproducible (``wb_simulator.faults``).

**Disorder.** ``CabinetSpec(disorder=Disorder(late_orders=0.3, short_pages=0.5, ...))`` (or
``Disorder.every(rate)``, ``Disorder.only(mode, rate)``) makes a cabinet's WB untidy the way real WB
is: orders delivered after their report lines, cancellations weeks late, returns of orders outside
the feed, service lines on nmId 0, short/repeated/failing finance pages, past ad days revised with
rows dropped, orders and sales re-dated (``wb_simulator.disorder``).
Off by default.

**Writes** change the state and are logged in order in ``sim.writes`` (``Write(kind, cabinet_id,
at, payload, result)``): bids (``PATCH /api/advert/v1/bids``, min-bid checks), price tasks
(quarantine, 208 duplicates), feedback answers, question answers/rejections.

**Mutators for tests:** ``sim.cancel_order(c, srid)``, ``sim.return_sale(c, srid)``,
``sim.place_order(c, nm_id, at, price, sale_at=None)`` (a hand-made order), ``sim.redate_order(c, srid,
new_date)``, ``sim.redate_sale(c, srid, new_date)`` (WB moves a row to another day, with a newer
lastChangeDate), ``sim.set_ad_day(c, advert_id, day, rows)`` (a hand-made fullstats day),
``sim.add_feedback(c, nm_id, text, valuation)``, ``sim.add_question(c, nm_id, text)``,
``sim.open_slot(warehouse_id, day, coefficient)``, ``sim.set_coefficients_disabled()``.

**Truth** (``sim.truth``): ``orders(c, day=None)``, ``sales(c, day=None)``,
``report_lines(c, date_from, date_to, period="daily")``, ``ad_stats(c, day)``, ``funnel(c, day)``,
``prices(c)``, ``stocks(c)``, ``cards(c)``, ``campaigns(c)``, ``feedbacks(c)``, ``questions(c)``,
``news()``, ``coefficients()``, ``day_totals(c, day)`` (reconciled per product and day),
``summary(c)``. See ``Truth`` for the definitions.

**Out of process:** ``/__sim`` routes (JSON) do the same: ``GET /__sim``, ``POST /__sim/tokens``,
``/__sim/revoke``, ``/__sim/advance``, ``/__sim/faults`` (``DELETE`` clears), ``/__sim/penalize``,
``/__sim/cancel-order``, ``/__sim/return-sale``, ``/__sim/feedbacks``, ``/__sim/questions``,
``/__sim/slots``, ``/__sim/coefficients``, ``GET /__sim/truth/{c}/summary``,
``GET /__sim/truth/{c}/days/{YYYY-MM-DD}``, ``GET /__sim/writes``.
CLI: ``optima-pipelines wb-sim --port 8123 [--host 127.0.0.1] [--seed 1] [--cabinets 3] [--time-scale 1]``.
"""

from wb_simulator.disorder import Disorder
from wb_simulator.faults import Faults
from wb_simulator.server import serve
from wb_simulator.simulator import Simulator, Truth, UnknownCabinet, Write
from wb_simulator.world import CabinetSpec

__all__ = ["CabinetSpec", "Disorder", "Faults", "Simulator", "Truth", "UnknownCabinet", "Write", "serve"]
