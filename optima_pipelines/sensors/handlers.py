"""What a request kind needs to be served: validation into run config, and the job that serves it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from dagster import JobDefinition

from optima_pipelines.warehouse.requests import Request


@dataclass(frozen=True)
class RequestHandler:
    kind: str
    job: JobDefinition
    queue: str
    #: Validate a request and return the run config of its run; raise InvalidInput/UnknownCabinet
    #: with a reason a person can act on (the request ends failed with it).
    run_config: Callable[[psycopg.Connection, Request], dict[str, Any]]
