"""A step's stdout and stderr: kept in a file for the UI, and copied to the process's own streams
with no line lost.

Dagster's default compute log manager (``LocalComputeLogManager``) points a step's stdout and stderr
at ``<DAGSTER_HOME>/storage/<run>/compute_logs/<step>.out|.err`` and copies each file back to the
stream with a ``tail -F`` process (and a Python process that kills it if the step's process dies),
which it terminates the moment the step ends (dagster-io/dagster#23336). The last lines a step
writes, a failed step's STEP_FAILURE among them, were often not copied yet: the run worker's log
(journald, ``kubectl logs``) missed the one line saying that a step failed, while the UI had it.

``OptimaComputeLogManager`` keeps the same files in the same place (the UI's stdout and stderr
tabs read them as before) and copies them with a thread of the step's own process, which at the
step's end copies what is left up to the end of the file before it stops: every line once, in
order, and no process started per step. A capture that reuses a step's file (a retried step) copies
only what it adds. Named in dagster.yaml (``compute_logs``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from optima_pipelines.orchestration.dagster_internals import (
    CapturedLogContext,
    ConfigurableClassData,
    LocalComputeLogManager,
)

#: How often the copying thread looks for new output while the step runs (the lag of a line in the
#: process's log; at the step's end it reads to the end of the file at once).
POLL_SECONDS = 0.2
#: How long a step's end waits for the copy of what it wrote last (a step that printed megabytes).
FINISH_TIMEOUT_SECONDS = 30.0
_CHUNK = 1 << 16


class _Copier(threading.Thread):
    """Copies a file from ``offset`` to the descriptor ``out`` as it grows, until told to finish and
    everything written before that is copied; then closes ``out``, which it owns (a copy still going
    after ``finish`` gave up waiting never writes to a descriptor number reused meanwhile)."""

    def __init__(self, path: str, offset: int, out: int) -> None:
        super().__init__(name=f"copy {os.path.basename(path)}", daemon=True)
        self._path, self._offset, self._out = path, offset, out
        self._finish = threading.Event()

    def run(self) -> None:
        writable = True
        try:
            with open(self._path, "rb") as source:
                source.seek(self._offset)
                while True:
                    finishing = self._finish.is_set()  # read before the last read: what came before it is copied
                    chunk = source.read(_CHUNK)
                    if chunk:
                        writable = writable and _write_all(self._out, chunk)
                    elif finishing:
                        return
                    else:
                        self._finish.wait(POLL_SECONDS)
        finally:
            os.close(self._out)

    def finish(self) -> None:
        self._finish.set()
        self.join(FINISH_TIMEOUT_SECONDS)


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data``; False when the stream is gone (its reader closed it): the file keeps it."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True


def _descriptor(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # a stream with no descriptor (a test runner's)
        return None


@contextmanager
def captured(stream: TextIO, path: str) -> Iterator[None]:
    """Point ``stream``'s descriptor (child processes' output included) at ``path`` and copy what lands
    there to where the descriptor pointed before, until everything written is copied."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "ab") as sink:
        offset = os.fstat(sink.fileno()).st_size
        fd = _descriptor(stream)
        if fd is None:
            yield
            return
        stream.flush()
        original = os.dup(fd)  # where the stream went: the copier writes there, and closes it
        os.dup2(sink.fileno(), fd)
    copier = _Copier(path, offset, original)
    copier.start()
    try:
        yield
    finally:
        try:
            stream.flush()
        finally:
            os.dup2(original, fd)
            copier.finish()


class OptimaComputeLogManager(LocalComputeLogManager):
    """Dagster's local compute log manager, whose copy of a step's output to the process's streams loses
    nothing (module docstring). ``base_dir`` defaults to Dagster's own: ``<DAGSTER_HOME>/storage``."""

    def __init__(
        self, base_dir: str | None = None, polling_timeout: float | None = None, inst_data: Any = None
    ) -> None:
        # Without a base_dir, "" until the instance registers: then Dagster's own, under its root.
        super().__init__(base_dir or "", polling_timeout=polling_timeout, inst_data=inst_data)

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        from dagster import Field, Float, StringSource

        return {
            "base_dir": Field(StringSource, is_required=False),
            "polling_timeout": Field(Float, is_required=False),
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> OptimaComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    def register_instance(self, instance: Any) -> None:
        super().register_instance(instance)
        if not self._base_dir:
            self._base_dir = os.path.join(instance.root_directory, "storage")

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        out = self.get_captured_local_path(log_key, "out")
        err = self.get_captured_local_path(log_key, "err")
        with captured(sys.stdout, out), captured(sys.stderr, err):
            yield CapturedLogContext(log_key)
        # Dagster's mark that the capture is complete (the UI stops polling the files).
        with open(self.complete_artifact_path(log_key), "a"):
            pass
