"""The metrics process: ``/metrics`` (Prometheus), ``/health`` (JSON, 503 when a part fails), ``/health/live``.

Started by ``optima-pipelines metrics`` (and by ``dev``). It listens on 127.0.0.1 unless told
otherwise and has no auth of its own: it shows figures, never a token or a run's data, and in
production it sits on the internal network next to Prometheus (docs/deploy.md).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from optima_pipelines.operations.health import run_checks
from optima_pipelines.operations.metrics import build_registry
from optima_pipelines.operations.runtime import Deployment


def create_app(dep: Deployment) -> Starlette:
    registry, collector = build_registry(dep.database_url, dep.schema, dep.settings.dagster_schema)
    instance_lock = threading.Lock()
    holder: dict[str, Any] = {}

    def instance() -> Any:
        with instance_lock:
            if "instance" not in holder:
                from dagster import DagsterInstance

                holder["instance"] = DagsterInstance.get()
            return holder["instance"]

    def metrics(_request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    def health(request: Request) -> Response:
        wb = request.query_params.get("wb", "1") not in ("0", "false", "no")
        checks = run_checks(
            dep.database_url,
            dep.schema,
            instance,
            dep.cipher(),
            dep.settings.wb_base_url,
            dagster_schema=dep.settings.dagster_schema,
            wb=wb,
        )
        healthy = all(c.ok for c in checks)
        body = {"healthy": healthy, "checks": [c.as_dict() for c in checks]}
        return JSONResponse(body, status_code=200 if healthy else 503)

    def live(_request: Request) -> Response:
        return PlainTextResponse("ok")

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # Open the Dagster instance now, beside serving, not inside the first probe's budget: building
        # it (dagster.yaml, the storage's modules and pool) takes 0.4-0.7 s on an idle machine and
        # several seconds on a loaded one, and a probe that failed for that would say the storage
        # does not answer when it does. A probe that comes while it is still being built waits for
        # it within its budget, and fails as "no answer" only if that is still not enough.
        threading.Thread(target=_open_quietly, args=(instance,), name="open dagster instance", daemon=True).start()
        yield
        collector.close()
        if "instance" in holder:
            holder["instance"].dispose()

    return Starlette(
        routes=[
            Route("/metrics", metrics),
            Route("/health", health),
            Route("/health/live", live),
        ],
        lifespan=lifespan,
    )


def _open_quietly(instance: Any) -> None:
    try:
        instance()
    except Exception:  # the health checks open it again and report what failed
        pass


def serve(dep: Deployment, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(create_app(dep), host=host, port=port, log_level="warning")
