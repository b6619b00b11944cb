"""A queue name leads to its code in one step: every queue's domain names modules of the package."""

from __future__ import annotations

from pathlib import Path

from optima_pipelines.orchestration.queues import ASSET_QUEUES, QUEUES

PACKAGE = Path(__file__).resolve().parents[2] / "optima_pipelines"


def test_every_queue_has_a_domain_whose_modules_exist() -> None:
    missing = {q.name: q.domain for q in QUEUES.values() if not any(PACKAGE.glob(f"*/{q.domain}.py"))}
    assert not missing, f"queues whose domain names no module <folder>/<domain>.py: {missing}"


def test_every_queue_constant_is_its_queue() -> None:
    import optima_pipelines.orchestration.queues as queues

    constants = {v for k, v in vars(queues).items() if k.isupper() and isinstance(v, str) and v in QUEUES}
    assert constants == set(QUEUES), "every queue has one constant in the queues module"
    assert set(ASSET_QUEUES.values()) <= set(QUEUES)
