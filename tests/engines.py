"""Helpers for the engines' tests (repricer, bulk pricing, auto-replies) against the WB simulator."""

from __future__ import annotations

from typing import Any

import pytest
from dagster import DagsterInstance, RunRequest, build_sensor_context

from optima_pipelines.definitions import RESOURCES, defs
from optima_pipelines.wb import WbConfig
from wb_simulator import Simulator


def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """WB client retries without real-time backoff (the simulator's faults would otherwise cost
    seconds each); everything else as configured."""
    original = WbConfig.from_env.__func__  # type: ignore[attr-defined]

    def from_env(cls: type[WbConfig], **kwargs: Any) -> WbConfig:
        kwargs.setdefault("backoff_base_seconds", 0.001)
        kwargs.setdefault("backoff_max_seconds", 0.01)
        kwargs.setdefault("write_settle_seconds", 0.001)
        return original(cls, **kwargs)

    monkeypatch.setattr(WbConfig, "from_env", classmethod(from_env))


def execute(run_request: RunRequest, instance: DagsterInstance):  # type: ignore[no-untyped-def]
    """Run what a sensor requested, in process, with its config and tags."""
    assert run_request.job_name is not None
    return defs.get_job_def(run_request.job_name).execute_in_process(
        run_config=run_request.run_config, instance=instance, tags=run_request.tags, raise_on_error=False
    )


def evaluate(sensor: Any, instance: DagsterInstance, cursor: str | None = None):  # type: ignore[no-untyped-def]
    with build_sensor_context(instance=instance, resources=RESOURCES, cursor=cursor) as context:
        return sensor(context), context


def writes(sim: Simulator, kind: str) -> list[Any]:
    return [w for w in sim.writes if w.kind == kind]


def selling_at_wb(sim: Simulator, cabinet: str) -> dict[int, tuple[int, int]]:
    """nm → (price before discount, discount) as WB has them now."""
    return {g["nmID"]: (int(g["sizes"][0]["price"]), g["discount"]) for g in sim.truth.prices(cabinet)}
