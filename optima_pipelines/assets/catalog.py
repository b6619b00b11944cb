"""The catalog (the `catalog-sync` queue): product cards nightly, prices every 30 min, both on demand.

``products``, ``prices`` and ``price_history`` are snapshots, partitioned by cabinet alone.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from optima_pipelines.assets.wb_sync import sync_partition_asset
from optima_pipelines.jobs.wb_sync import SyncJobSpec, cabinet_sync_job, sweep_job
from optima_pipelines.sync import catalog

FEEDS = ("products", "prices", "price_history")


products = sync_partition_asset(
    "products",
    "catalog",
    {
        "products": "The cabinet's product cards (`POST /content/v2/get/cards/list`): WB article (nm_id), "
        "vendor code, brand, subject, title, sizes with their barcodes. A complete listing replaces the "
        "cabinet's cards: cards WB no longer lists (deleted or in the trash) are removed.",
    },
    catalog.cards,
    by_day=False,
)
prices_and_history = sync_partition_asset(
    "prices_and_history",
    "catalog",
    {
        "prices": "Each product's current price before the seller's discount, the seller's discount and "
        "the club discount, per size too (`GET /api/v2/list/goods/filter`).",
        "price_history": "Every (price, discount, club discount) a product had, valid from the sync that first "
        "saw it: WB keeps no price history, this table is it.",
    },
    catalog.prices,
    by_day=False,
)


CATALOG_CARDS_SPEC = SyncJobSpec(
    name="catalog_cards_sync",
    queue=catalog.QUEUE,
    feeds=("products",),
    body=catalog.cards,
    description="One cabinet's product cards, the whole listing.",
    state_feed=catalog.CARDS_STATE_FEED,
    cabinet_partitioned=FEEDS,
)
catalog_cards_job = cabinet_sync_job(CATALOG_CARDS_SPEC)
catalog_cards_sweep = sweep_job(CATALOG_CARDS_SPEC)
CATALOG_PRICES_SPEC = SyncJobSpec(
    name="catalog_prices_sync",
    queue=catalog.QUEUE,
    feeds=("prices", "price_history"),
    body=catalog.prices,
    description="One cabinet's current prices, and the price history rows they add.",
    state_feed=catalog.PRICES_STATE_FEED,
    cabinet_partitioned=FEEDS,
)
catalog_prices_job = cabinet_sync_job(CATALOG_PRICES_SPEC)
catalog_prices_sweep = sweep_job(CATALOG_PRICES_SPEC)
catalog_full_job = cabinet_sync_job(
    SyncJobSpec(
        name="catalog_full_sync",
        queue=catalog.QUEUE,
        feeds=FEEDS,
        body=catalog.full,
        description="On demand (request kind catalog-sync, or the Launchpad): a cabinet's cards and prices.",
        user_trigger="manual",
        cabinet_partitioned=FEEDS,
    )
)
