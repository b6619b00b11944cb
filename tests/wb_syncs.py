"""Helpers for the tests of the WB syncs (finance, ads, funnel, catalog, inventory, news, autobidder-sync, report imports).

``served`` serves a simulator over HTTP, points the deployment at it and registers its cabinets
(tokens encrypted in the cabinets table, partitions added); the other helpers run jobs in process
and read what they recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypeVar

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, build_sensor_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.orchestration.runconfig import cabinet_run_config
from optima_pipelines.partitions import CABINETS_NAME
from optima_pipelines.timeutil import MOSCOW
from optima_pipelines.warehouse.cabinets import add_cabinet
from optima_pipelines.warehouse.secrets import TokenCipher, load_key
from wb_simulator import CabinetSpec, Simulator, serve

#: WB's one-request-a-minute limits become 0.1 s; fullstats' 20 s, 0.03 s.
TIME_SCALE = 600

T = TypeVar("T")


def simulator(*specs: CabinetSpec, seed: int = 5) -> Simulator:
    """A simulator whose clock is pinned at the real now (the syncs take "today" from the real clock)."""
    now = datetime.now(MOSCOW).replace(tzinfo=None, microsecond=0)
    return Simulator(seed=seed, cabinets=list(specs), time_scale=TIME_SCALE, now=now)


@contextmanager
def served(
    sim: Simulator, monkeypatch: Any, warehouse_conn: Any, settings: Any, instance: DagsterInstance
) -> Iterator[str]:
    with serve(sim) as base_url:
        monkeypatch.setenv("OPTIMA_WB_BASE_URL", base_url)
        monkeypatch.setenv("OPTIMA_WB_TIME_SCALE", str(TIME_SCALE))
        cipher = TokenCipher(load_key(settings))
        for cabinet in sim.cabinets:
            add_cabinet(warehouse_conn, cipher, cabinet, cabinet.upper(), sim.token(cabinet))
        instance.add_dynamic_partitions(CABINETS_NAME, list(sim.cabinets))
        yield base_url


def run_job(name: str, instance: DagsterInstance, cabinet: str, *, tags: dict[str, str] | None = None, **config: Any):
    job = defs.get_job_def(name)
    return job.execute_in_process(
        run_config=cabinet_run_config(name, cabinet, **config), instance=instance, tags=tags or {}, raise_on_error=False
    )


def materializations(instance: DagsterInstance, asset: str, after: int = 0) -> dict[str, dict[str, Any]]:
    """partition → the metadata of its latest materialization after storage id ``after``."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), after_storage_id=after or None), limit=10_000, ascending=True
    ).records
    out = {}
    for r in records:
        mat = r.asset_materialization
        assert mat is not None
        out[str(r.partition_key)] = {k: v.value for k, v in mat.metadata.items()}
    return out


def latest_storage_id(instance: DagsterInstance) -> int:
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=AssetKey("wb_report_lines")), limit=1)
    ids = [r.storage_id for r in records.records]
    for asset in ("ad_campaign_stats", "rnp_funnel_stats", "stocks", "products", "prices", "ad_campaigns"):
        ids += [
            r.storage_id for r in instance.fetch_materializations(AssetKey(asset), limit=1, ascending=False).records
        ]
    return max(ids, default=0)


def evaluate_requests_sensor(instance: DagsterInstance):
    from optima_pipelines.sensors.requests import requests_sensor

    with build_sensor_context(instance=instance, resources=RESOURCES) as context:
        return requests_sensor(context)


def money(value: Any) -> Decimal:
    """WB's money (a JSON number or the finance API's string) as an exact Decimal."""
    return Decimal(str(value))


def half_up(value: Decimal, places: int = 2) -> Decimal:
    """``value`` rounded as PostgreSQL's ``round(numeric, places)`` does: half away from zero
    (Python's ``round`` of a Decimal rounds half to even: 40.625 → 40.62 where PostgreSQL says 40.63)."""
    return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def advance_until_changed(sim: Simulator, step: timedelta, read: Callable[[], T], before: T) -> T:
    """Move the simulator's clock on by ``step`` until ``read()`` differs from ``before``, for at most a
    day, and return what it read last: a Moscow night can pass hours without an order, a sale or a
    return (two hours from 01:22 did, on 2026-12-06), so "time passed" alone changes nothing."""
    moved = timedelta(0)
    while True:
        sim.advance(step)
        moved += step
        now = read()
        if now != before or moved >= timedelta(days=1):
            return now


def wait_until(moment: datetime, limit: float = 10.0) -> None:
    """Wait for a resume time a sync recorded (what the resume sensor does), at most ``limit`` seconds."""
    seconds = (moment - datetime.now(moment.tzinfo)).total_seconds()
    if seconds > limit:
        raise AssertionError(f"resume time {moment} is {seconds:.1f}s away, more than {limit}s")
    time.sleep(max(0.0, seconds))
