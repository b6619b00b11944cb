"""The WB API resource: a ``WbClient`` per cabinet, its token read from the warehouse at run time."""

# No "from __future__ import annotations" here: Dagster reads ResourceDependency from live annotations.
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import psycopg
from dagster import ConfigurableResource, InitResourceContext, ResourceDependency

from optima_pipelines.errors import OptimaError
from optima_pipelines.landing.store import Landing, LandingError, process_landing
from optima_pipelines.logs import get_logger
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.warehouse.cabinets import get_token, mark_token_rejected
from optima_pipelines.wb import PostgresLimiterStore, RateLimiter, WbAuthError, WbClient, WbConfig, token_type_of

log = get_logger(__name__)


class _CabinetClient(WbClient):
    """A WbClient whose ``with`` block, left by WB rejecting the token itself, marks the cabinet."""

    def __init__(self, *args: Any, on_error: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._on_error = on_error

    def __exit__(self, *exc: object) -> None:
        try:
            if len(exc) > 1 and isinstance(exc[1], WbAuthError):
                self._on_error(exc[1])
        finally:
            super().__exit__(*exc)


class WbApi(ConfigurableResource):
    """WB's seller API for assets: ``with wb.client(cabinet_id) as client: ...``.

    The token is decrypted from the cabinets table when ``client()`` is called and stays inside the
    client: it is never part of this resource's config, run config, tags or metadata. Rate-limit
    buckets live in the warehouse (``wb_rate_limits``), so every run of a cabinet, in any process,
    shares them and honours a pause an earlier run learned. A wait longer than
    ``max_wait_seconds`` raises ``WbDeferred`` instead of sleeping in the run worker.

    Every answer its clients decode lands (OPTIMA_LANDING_URL, landing/store.py): in the process's
    spool as it comes, in Parquet when the run's step ends (``teardown_after_execution``).
    """

    #: One base URL for every WB category (the simulator's address); None: OPTIMA_WB_BASE_URL,
    #: else WB's real hosts.
    base_url: str | None = None
    max_wait_seconds: float = 5.0
    #: Only for a simulator running its clock faster; None: OPTIMA_WB_TIME_SCALE (default 1).
    time_scale: float | None = None
    warehouse: ResourceDependency[Warehouse]

    def config(self, max_wait_seconds: float | None = None) -> WbConfig:
        overrides: dict[str, object] = {
            "max_wait_seconds": self.max_wait_seconds if max_wait_seconds is None else max_wait_seconds
        }
        if self.time_scale is not None:
            overrides["time_scale"] = self.time_scale
        if self.base_url:
            return WbConfig.for_base_url(self.base_url, **overrides)
        return WbConfig.from_env(**overrides)

    def landing(self) -> Landing | None:
        """Where this process lands WB's answers (None: the landing is off)."""
        return process_landing()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """The run's landed answers become Parquet files (one per feed and day), whatever the run did."""
        landing = self.landing()
        if landing is None:
            return
        try:
            landing.flush()
        except LandingError as exc:  # the spool stays on disk: the next flush publishes it
            log.warning(str(exc))

    def client(
        self, cabinet_id: str, max_wait_seconds: float | None = None, config_changes: dict[str, object] | None = None
    ) -> WbClient:
        """A client for one cabinet (raises ``UnknownCabinet`` for a cabinet that does not exist).
        Close it when done, e.g. ``with wb.client(cabinet_id) as client``. ``max_wait_seconds``
        overrides the resource's for work a person is waiting on (a partition, an import);
        ``config_changes`` other ``WbConfig`` fields (a sensor's short timeouts and single attempt)."""
        with self.warehouse.connect() as conn:
            token = get_token(conn, self.warehouse.cipher(), cabinet_id)
        try:
            return _CabinetClient(
                cabinet_id,
                token,
                config=self.config(max_wait_seconds).with_changes(**(config_changes or {})),
                limiter=RateLimiter(PostgresLimiterStore(self.warehouse.connect)),
                token_type=token_type_of(token) or "personal",
                on_error=self.token_rejected,
                landing=self.landing(),
            )
        except WbAuthError as exc:  # a stored token the client refuses to send
            self.token_rejected(exc)
            raise

    def token_rejected(self, exc: WbAuthError) -> None:
        """Record a token WB rejected (not one lacking a category) on its cabinet: token_invalid, with
        why and when, so that scheduled work stops asking WB with it. Logged once, at the change."""
        if not exc.token_rejected:
            return
        try:
            with self.warehouse.connect() as conn:
                changed = mark_token_rejected(conn, exc.cabinet_id, str(exc))
                conn.commit()
        except (psycopg.Error, OptimaError) as failure:  # the run still fails with WB's answer
            log.warning(f"could not mark cabinet {exc.cabinet_id} token_invalid: {failure}")
            return
        if changed:
            log.error(
                f"cabinet {exc.cabinet_id} is now token_invalid and no longer scheduled: {exc}. "
                f"Give it a new token: optima-pipelines cabinets set-token {exc.cabinet_id} --token-file FILE"
            )


def lazy_client(wb: WbApi, cabinet_id: str, max_wait: float | None, stack: ExitStack) -> Callable[[], WbClient]:
    """The cabinet's WB client, opened on first use and closed with ``stack`` (a sync's
    ``SyncInput.client``: a run that finds nothing to do never opens one)."""
    opened: list[WbClient] = []

    def client() -> WbClient:
        if not opened:
            opened.append(stack.enter_context(wb.client(cabinet_id, max_wait)))
        return opened[0]

    return client
