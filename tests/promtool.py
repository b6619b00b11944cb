"""Prometheus' own checker, for the suite: the alert rules and the /metrics exposition are checked by
`promtool` (Debian's `prometheus` package; .ci/run installs it). Missing, the tests fail: they never
skip."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "deploy" / "prometheus"


def promtool(*args: str, stdin: str | None = None, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    assert path, (
        "promtool is missing: install Debian's prometheus package "
        "(apt-get install -y --no-install-recommends prometheus), as .ci/run does"
    )
    return subprocess.run([path, *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120)
