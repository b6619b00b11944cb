"""Run config of the one-op cabinet jobs: every sync job has one op named ``<job>_op`` taking the cabinet."""

from __future__ import annotations

from typing import Any


def op_name(job_name: str) -> str:
    return f"{job_name}_op"


def cabinet_run_config(job_name: str, cabinet_id: str, **config: Any) -> dict[str, Any]:
    """Run config of a cabinet job (what schedules, sensors, requests, the demo and tests pass)."""
    return {"ops": {op_name(job_name): {"config": {"cabinet_id": cabinet_id, **config}}}}
