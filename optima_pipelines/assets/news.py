"""WB news for the knowledge base (the `kb-wb-news-sync` queue, every 3 hours) → ``kb_articles``."""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
from collections.abc import Callable

from dagster import AssetExecutionContext, Failure, MaterializeResult, asset, define_asset_job

from optima_pipelines.orchestration.queues import TAG_TRIGGER, queue_tags
from optima_pipelines.orchestration.retries import DEFAULT_RETRY, fail_on_permanent
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi
from optima_pipelines.sync import news
from optima_pipelines.sync.runs import ANY_CABINET, SyncInput, run_sync
from optima_pipelines.warehouse.cabinets import get_token
from optima_pipelines.wb import PostgresLimiterStore, RateLimiter, WbClient, token_type_of


def news_client_factory(warehouse: Warehouse, wb: WbApi) -> Callable[[str], WbClient]:
    """Clients for news requests. Unlike ``WbApi.client`` they never resend a request themselves
    (one attempt): every request must first take its one-a-minute slot (sync/news.py)."""
    config = wb.config(max_wait_seconds=5.0).with_changes(max_attempts=1)
    limiter = RateLimiter(PostgresLimiterStore(warehouse.connect))

    def client_for(cabinet_id: str) -> WbClient:
        with warehouse.connect() as conn:
            token = get_token(conn, warehouse.cipher(), cabinet_id)
        return WbClient(
            cabinet_id,
            token,
            config=config,
            limiter=limiter,
            token_type=token_type_of(token) or "personal",
            landing=wb.landing(),
        )

    return client_for


@asset(name=news.FEED, group_name="news", kinds={"postgres"}, retry_policy=DEFAULT_RETRY)
def kb_articles(context: AssetExecutionContext, warehouse: Warehouse, wb: WbApi) -> MaterializeResult:
    """WB's news for sellers (`GET /api/communications/v2/news`): header, text, publication time and
    topics, for the knowledge base. Incremental by news id; read with any active cabinet's token (the
    next one when WB rejects it), never more than one request a minute."""
    trigger = "scheduled" if context.run.tags.get(TAG_TRIGGER) == "schedule" else "manual"
    inp = SyncInput(
        connect=warehouse.connect,
        cabinet_id=ANY_CABINET,
        run_id=context.run_id,
        trigger=trigger,
        client_for=news_client_factory(warehouse, wb),
    )
    try:
        (run,) = run_sync(news.sync, inp)
    except news.NoNewsToken as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    except Exception as exc:
        fail_on_permanent(exc, "WB news")
        raise
    context.log.info(f"news: {run.summary() | inp.notes | {'cabinet': run.cabinet_id}}")
    return MaterializeResult(
        metadata={
            "rows_fetched": run.rows_fetched,
            "rows_inserted": run.merge.inserted,
            "rows_updated": run.merge.updated,
            "wb_requests": run.requests,
            "token_of_cabinet": run.cabinet_id,
            "rejected_tokens_of": ", ".join(inp.notes["rejected_tokens_of"]) or "none",
            "paused_until": run.deferred_until.isoformat() if run.deferred_until else "",
            "trigger": trigger,
        }
    )


news_sync_job = define_asset_job(
    "news_sync",
    selection=[kb_articles],
    tags=queue_tags(news.QUEUE),
    description="WB's news into the knowledge base, incremental by id, one request a minute at most.",
)
