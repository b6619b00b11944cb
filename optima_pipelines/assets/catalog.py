"""The catalog (the `catalog-sync` queue): product cards nightly, prices every 30 min, both on demand.

``products``, ``prices`` and ``price_history`` are snapshots, partitioned by cabinet alone.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Iterator

from dagster import AssetExecutionContext, AssetSpec, MaterializeResult, asset, multi_asset

from optima_pipelines.assets.wb_sync import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SyncJobSpec,
    cabinet_sync_job,
    fail_on_permanent,
    partition_trigger,
)
from optima_pipelines.cabinets import get_cabinet
from optima_pipelines.partitions import CABINETS
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import catalog
from optima_pipelines.sync.runs import SyncInput, SyncRun

FEEDS = ("products", "prices", "price_history")


def _metadata(run: SyncRun, trigger: str) -> dict[str, int | str]:
    return {
        "rows_fetched": run.rows_fetched,
        "rows_inserted": run.merge.inserted,
        "rows_updated": run.merge.updated,
        "rows_deleted": run.rows_deleted,
        "wb_requests": run.requests,
        "trigger": trigger,
    }


@asset(partitions_def=CABINETS, group_name="catalog", kinds={"postgres"}, retry_policy=DEFAULT_RETRY)
def products(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """The cabinet's product cards (`POST /content/v2/get/cards/list`): WB article (nm_id), vendor code,
    brand, subject, title, sizes with their barcodes. A complete listing replaces the cabinet's
    cards: cards WB no longer lists (deleted or in the trash) are removed."""
    cabinet_id = context.partition_key
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            run = catalog.sync_cards(warehouse.connect, client, cabinet_id, run_id=context.run_id, trigger=trigger)
    except Exception as exc:
        fail_on_permanent(exc, f"products of cabinet {cabinet_id}")
        raise
    return MaterializeResult(metadata=_metadata(run, trigger))


@multi_asset(
    specs=[
        AssetSpec(
            "prices",
            group_name="catalog",
            kinds={"postgres"},
            description="Each product's current price before the seller's discount, the seller's discount and "
            "the club discount, per size too (`GET /api/v2/list/goods/filter`).",
        ),
        AssetSpec(
            "price_history",
            group_name="catalog",
            kinds={"postgres"},
            description="Every (price, discount, club discount) a product had, valid from the sync that first "
            "saw it: WB keeps no price history, this table is it.",
        ),
    ],
    partitions_def=CABINETS,
    retry_policy=DEFAULT_RETRY,
)
def prices_and_history(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> Iterator[MaterializeResult]:
    cabinet_id = context.partition_key
    trigger = partition_trigger(context)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
        with wb.client(cabinet_id, max_wait_seconds=INTERACTIVE_MAX_WAIT_SECONDS) as client:
            prices_run, history_run = catalog.sync_prices(
                warehouse.connect, client, cabinet_id, run_id=context.run_id, trigger=trigger
            )
    except Exception as exc:
        fail_on_permanent(exc, f"prices of cabinet {cabinet_id}")
        raise
    yield MaterializeResult(asset_key="prices", metadata=_metadata(prices_run, trigger))
    yield MaterializeResult(asset_key="price_history", metadata=_metadata(history_run, trigger))


def _cards(call: SyncInput) -> list[SyncRun]:
    return [catalog.sync_cards(call.connect, call.client(), call.cabinet_id, run_id=call.run_id, trigger=call.trigger)]


def _prices(call: SyncInput) -> list[SyncRun]:
    return list(
        catalog.sync_prices(call.connect, call.client(), call.cabinet_id, run_id=call.run_id, trigger=call.trigger)
    )


def _full(call: SyncInput) -> list[SyncRun]:
    return [*_cards(call), *_prices(call)]


catalog_cards_job = cabinet_sync_job(
    SyncJobSpec(
        name="catalog_cards_sync",
        queue=catalog.QUEUE,
        feeds=("products",),
        body=_cards,
        description="One cabinet's product cards, the whole listing.",
        state_feed=catalog.CARDS_STATE_FEED,
        cabinet_partitioned=FEEDS,
    )
)
catalog_prices_job = cabinet_sync_job(
    SyncJobSpec(
        name="catalog_prices_sync",
        queue=catalog.QUEUE,
        feeds=("prices", "price_history"),
        body=_prices,
        description="One cabinet's current prices, and the price history rows they add.",
        state_feed=catalog.PRICES_STATE_FEED,
        cabinet_partitioned=FEEDS,
    )
)
catalog_full_job = cabinet_sync_job(
    SyncJobSpec(
        name="catalog_full_sync",
        queue=catalog.QUEUE,
        feeds=FEEDS,
        body=_full,
        description="On demand (request kind catalog-sync, or the Launchpad): a cabinet's cards and prices.",
        user_trigger="manual",
        cabinet_partitioned=FEEDS,
    )
)
