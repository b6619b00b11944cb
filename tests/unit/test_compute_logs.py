"""A step's output reaches both the UI's compute log files and the process's own streams, every line once.

Each test runs a "step" in a child process under OptimaComputeLogManager.capture_logs, as Dagster's
step execution does, and reads what the child's real stdout and stderr received (what journald or
`kubectl logs` would show) beside the files the UI reads.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from optima_pipelines.orchestration.compute_logs import OptimaComputeLogManager
from optima_pipelines.orchestration.dagster_internals import LocalComputeLogManager

STEP = textwrap.dedent(
    """
    import os, subprocess, sys
    from optima_pipelines.orchestration.compute_logs import OptimaComputeLogManager

    manager = OptimaComputeLogManager(sys.argv[1])
    captures = int(sys.argv[2])
    print("before the step", flush=True)
    for n in range(captures):
        with manager.capture_logs(["run-1", "compute_logs", "step"]):
            print(f"out {n} from python", flush=True)  # stdout to a pipe is block-buffered
            sys.stderr.write(f"err {n} from python\\n")
            subprocess.run(["sh", "-c", f"echo out {n} from a child; echo err {n} from a child >&2"], check=True)
            os.write(2, f"err {n} written last, right before the step ends\\n".encode())
    print("after the step", flush=True)
    sys.stderr.write("after the step\\n")
    """
)


def _child(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a new Python with ``args``: what its real stdout and stderr received."""
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=60, check=True
    )


def _run_step(base_dir: Path, captures: int = 1) -> subprocess.CompletedProcess[str]:
    return _child(STEP, base_dir, captures)


def _file(base_dir: Path, ext: str) -> str:
    return (base_dir / "run-1" / "compute_logs" / f"step.{ext}").read_text()


def test_every_line_a_step_writes_reaches_the_process_streams_once_and_in_order_and_the_ui_files(
    tmp_path: Path,
) -> None:
    done = _run_step(tmp_path)

    assert done.stdout.splitlines() == ["before the step", "out 0 from python", "out 0 from a child", "after the step"]
    # The last line, written just before the step ends (a failed step's STEP_FAILURE is such a line),
    # is copied before the stream is given back: nothing after the step comes before it.
    assert done.stderr.splitlines() == [
        "err 0 from python",
        "err 0 from a child",
        "err 0 written last, right before the step ends",
        "after the step",
    ]
    assert _file(tmp_path, "out").splitlines() == ["out 0 from python", "out 0 from a child"]
    assert _file(tmp_path, "err").splitlines() == [
        "err 0 from python",
        "err 0 from a child",
        "err 0 written last, right before the step ends",
    ]
    manager = OptimaComputeLogManager(str(tmp_path))
    assert manager.is_capture_complete(["run-1", "compute_logs", "step"])


def test_a_step_captured_again_into_its_file_copies_only_what_it_adds(tmp_path: Path) -> None:
    """A retried step writes to the same file: the process's log shows each attempt's lines once."""
    done = _run_step(tmp_path, captures=2)

    errs = done.stderr.splitlines()
    assert errs == [
        f"err {n} {what}"
        for n in (0, 1)
        for what in ("from python", "from a child", "written last, right before the step ends")
    ] + ["after the step"]
    assert _file(tmp_path, "err").splitlines() == errs[:-1]


def test_without_a_base_dir_the_files_are_where_dagsters_own_manager_keeps_them(tmp_path: Path) -> None:
    """Named in dagster.yaml without settings, the manager keeps Dagster's layout: <DAGSTER_HOME>/storage."""

    class Instance:
        root_directory = str(tmp_path)

    ours, dagsters = OptimaComputeLogManager(), LocalComputeLogManager(str(tmp_path / "storage"))
    ours.register_instance(Instance())  # type: ignore[arg-type]
    key = ["run-1", "compute_logs", "step"]
    assert ours.get_captured_local_path(key, "err") == dagsters.get_captured_local_path(key, "err")


def test_many_steps_in_one_run_worker_leave_no_descriptor_or_thread_behind(tmp_path: Path) -> None:
    """A warm run worker captures thousands of steps in one process: each capture gives back what it took."""
    script = textwrap.dedent(
        """
        import os, sys, threading, time
        from optima_pipelines.orchestration.compute_logs import OptimaComputeLogManager

        manager = OptimaComputeLogManager(sys.argv[1])
        def held():
            return len(os.listdir("/proc/self/fd")), threading.active_count()
        before = held()
        for n in range(50):
            with manager.capture_logs(["run-1", "compute_logs", f"step-{n}"]):
                print(f"step {n}")
        time.sleep(0.1)
        sys.stderr.write(f"{before}\\n{held()}\\n")
        """
    )
    done = _child(script, tmp_path)
    assert done.stdout.splitlines() == [f"step {n}" for n in range(50)]
    before, after = done.stderr.splitlines()  # (open descriptors, threads) before and after the 50 steps
    assert after == before
