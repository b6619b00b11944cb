"""The simulated world the demo and `optima-pipelines wb-sim` serve: one definition, so that `dev`
can bring back the very simulator a demo loaded from (same seed, same cabinets, same tokens)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from wb_simulator.simulator import Simulator
from wb_simulator.world import CabinetSpec

STATE_FILE = "wb-simulator.json"


@dataclass(frozen=True)
class SimSetup:
    seed: int = 1
    cabinets: int = 3
    orders_per_day: int = 300
    prefix: str = "sim"
    #: WB's rate limits refill this many times faster (a client must use the same scale).
    time_scale: float = 1.0

    def cabinet_ids(self) -> list[str]:
        return [f"{self.prefix}-{i + 1}" for i in range(self.cabinets)]

    def build(self, now: datetime | None = None) -> tuple[Simulator, dict[str, str]]:
        """The simulator and one token per cabinet. The simulator accepts only tokens it issued, and
        issues them deterministically (seed, order), so every build of one setup issues, and accepts,
        the same tokens: a cabinet registered by the demo keeps working with a later build.

        ``now`` pins the clock: the WB that a demo run saw at that moment, to check what it loaded."""
        # Cabinets differ in size so that the demo's figures are not three copies of one shop.
        specs = [
            CabinetSpec(id=cabinet_id, orders_per_day=max(0, self.orders_per_day * (3 + i) // 4), products=30 + 10 * i)
            for i, cabinet_id in enumerate(self.cabinet_ids())
        ]
        sim = Simulator(seed=self.seed, cabinets=specs, time_scale=self.time_scale, now=now)
        return sim, {cabinet_id: sim.token(cabinet_id) for cabinet_id in self.cabinet_ids()}

    def save(self, state_dir: Path) -> Path:
        path = state_dir / STATE_FILE
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, state_dir: Path) -> SimSetup | None:
        path = state_dir / STATE_FILE
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text()))
