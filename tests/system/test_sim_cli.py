"""`optima-pipelines wb-sim` as a process: prints a base URL and working tokens, stops on SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.system


def test_wb_sim_command_serves_and_prints_tokens() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optima_pipelines.cli",
            "wb-sim",
            "--port",
            "0",
            "--cabinets",
            "2",
            "--time-scale",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while sum(line.startswith("cabinet ") for line in lines) < 2:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "wb-sim exited early:\n" + "".join(lines)
            assert time.monotonic() < deadline, "wb-sim printed no tokens within 60 s:\n" + "".join(lines)
            lines.append(line)
        base = next(line.split("=", 1)[1].strip() for line in lines if line.startswith("export OPTIMA_WB_BASE_URL="))
        tokens = {line.split()[1].rstrip(":"): line.split()[2] for line in lines if line.startswith("cabinet ")}
        assert set(tokens) == {"sim-1", "sim-2"}
        sids = set()
        for token in tokens.values():
            answer = httpx.get(f"{base}/common/api/v1/seller-info", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200
            sids.add(answer.json()["sid"])
        assert len(sids) == 2
        orders = httpx.get(
            f"{base}/statistics/api/v1/supplier/orders",
            params={"dateFrom": "2020-01-01"},
            headers={"Authorization": tokens["sim-1"]},
        )
        assert orders.status_code == 200 and len(orders.json()) > 1000
        assert httpx.get(f"{base}/__sim").json()["time_scale"] == 60
    finally:
        proc.send_signal(signal.SIGINT)
        # Ctrl-C stops the server cleanly: a zero exit, not a traceback (proc.wait raises if it hangs).
        assert proc.wait(timeout=30) == 0, proc.stdout.read() if proc.stdout else ""


def test_wb_sim_refuses_bad_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "optima_pipelines.cli", "wb-sim", "--cabinets", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.strip() == "error: --cabinets must be from 1 to 50, got 0"
