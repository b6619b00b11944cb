"""A wrapper's child that does not stop when told to (operations/processes.run_child's stop_timeout):
what `serve run-worker` does when Celery's shutdown hangs."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil

# A wrapper (run_child) around a child that ignores the stop signal and has a child of its own.
WRAPPER = textwrap.dedent(
    """
    import signal, sys
    from optima_pipelines.operations.processes import run_child
    stubborn = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGQUIT, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "print('ready', flush=True); time.sleep(600)"
    )
    sys.exit(run_child([sys.executable, "-c", stubborn], {}, stop_signal=signal.SIGQUIT, stop_timeout=1.0))
    """
)


def test_a_child_that_ignores_the_stop_signal_is_killed_with_its_children_after_the_timeout() -> None:
    wrapper = subprocess.Popen(
        [sys.executable, "-c", WRAPPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wrapper.stdout is not None and wrapper.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while len(psutil.Process(wrapper.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = psutil.Process(wrapper.pid).children(recursive=True)
        assert len(tree) == 2, tree
        wrapper.send_signal(signal.SIGTERM)
        _out, err = wrapper.communicate(timeout=30)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert "did not stop within 1 s of the signal: killed" in err, err
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == [], alive
