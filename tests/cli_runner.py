"""`optima-pipelines` as the tests run it: in this process (``invoke_cli``), or as a real process (``run_cli``).

Both take the same arguments (the command's words, environment overrides, stdin) and return a
``subprocess.CompletedProcess`` (``returncode``, ``stdout``, ``stderr``).

A real process costs 2-3 s of Python and Dagster imports; in this process a call costs what the
command does. ``invoke_cli`` gives a call what a fresh ``optima-pipelines`` process would have:

- the exit code of its ``SystemExit``; an unexpected exception is exit code 1 with its formatted
  traceback at the end of ``stderr``, as Python prints it, so "no Traceback" assertions still hold;
- the environment of the process with the overrides, for the call only: the whole ``os.environ``
  is put back afterwards, what commands add to it themselves (``Deployment.apply_env``) included;
- what ``main()`` installs (``logs.install``: redaction, correlation, our loggers' lines on stderr),
  for the call only, writing to the call's stderr;
- none of this process's Dagster storage state (the storage engines, the tables it checked, the
  schema probes it remembered): the call starts without it, as a fresh process, and what it opened
  is closed after it (its pooled sessions).

Keep ``run_cli`` for what only a process shows: that ``python -m optima_pipelines.cli`` and the
console script themselves print one line without a traceback, what the process's own logging and
stdin pipe do, and commands that hand over to another program (``dagster``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from click.testing import CliRunner

PROG_NAME = "optima-pipelines"

#: How the real process is started: ``python -m optima_pipelines.cli``, or the installed console script.
Entry = Literal["module", "script"]


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, entry: Entry = "module"
) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, as a user runs it."""
    if entry == "module":
        argv = [sys.executable, "-m", "optima_pipelines.cli", *args]
    else:  # the console script of `pip install`, beside this interpreter
        script = Path(sys.executable).parent / PROG_NAME
        assert script.exists(), f"{script} is not installed: pip install -e ."
        argv = [str(script), *args]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=120,
    )


def invoke_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The command in this process (module docstring: what it shares with a real process)."""
    from optima_pipelines.cli import cli

    saved = dict(os.environ)
    try:
        os.environ.update(env or {})
        with _fresh_dagster_storage(), _logs_of_main():
            # fd: what is written to file descriptors 1 and 2 (not only sys.stdout/sys.stderr) is the call's.
            result = CliRunner(capture="fd").invoke(cli, list(args), input=stdin, prog_name=PROG_NAME)
    finally:
        _restore_environ(saved)
    stdout, stderr, code = result.stdout, result.stderr, result.exit_code
    if isinstance(result.exception, SystemExit):
        exit_code = result.exception.code
        if exit_code is not None and not isinstance(exit_code, int):
            # Python prints sys.exit("message") to stderr; CliRunner put it on stdout.
            stdout = stdout.removesuffix(f"{exit_code}\n")
            stderr += f"{exit_code}\n"
    elif result.exception is not None and result.exc_info is not None:
        # What Python prints for an exception nobody caught, and its exit code (CliRunner's too: 1).
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess([PROG_NAME, *args], int(code), stdout, stderr)


def _restore_environ(saved: dict[str, str]) -> None:
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


class _CallStderr:
    """sys.stderr as it is when written to: the call's, while CliRunner runs the command."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextmanager
def _logs_of_main() -> Iterator[None]:
    """``logs.install()`` as ``main()`` calls it first, for the call only: installed afresh (with the
    call's OPTIMA_LOG_FORMAT), its handler writing to the call's stderr, then everything put back."""
    from optima_pipelines import logs

    logger = logging.getLogger(logs.ROOT_LOGGER)
    factory, installed = logging.getLogRecordFactory(), logs._installed
    handlers, level = list(logger.handlers), logger.level
    logger.handlers = [h for h in handlers if not getattr(h, "optima", False)]
    logs._installed = False
    try:
        logs.install()
        for handler in logger.handlers:
            if getattr(handler, "optima", False) and isinstance(handler, logging.StreamHandler):
                handler.setStream(_CallStderr())  # type: ignore[arg-type]
        yield
    finally:
        logging.setLogRecordFactory(factory)
        logger.handlers, logger.level, logs._installed = handlers, level, installed


@contextmanager
def _fresh_dagster_storage() -> Iterator[None]:
    """The process-wide state of Dagster's storage (orchestration/storage.py, dagster_internals) empty
    for the call, as in a new process; the engines the call created disposed after it (their pooled
    sessions closed), and this process's own state put back."""
    storage = sys.modules.get("optima_pipelines.orchestration.storage")
    internals = sys.modules.get("optima_pipelines.orchestration.dagster_internals")
    engines = dict(storage._ENGINES) if storage else {}
    checked = set(storage._CHECKED) if storage else set()
    probed = set(internals._PROBED) if internals else set()
    if storage:
        storage._ENGINES.clear()
        storage._CHECKED.clear()
    if internals:
        internals._PROBED.clear()
    try:
        yield
    finally:
        storage = sys.modules.get("optima_pipelines.orchestration.storage")
        internals = sys.modules.get("optima_pipelines.orchestration.dagster_internals")
        if storage:
            with storage._LOCK:
                created = [e for key, e in storage._ENGINES.items() if engines.get(key) is not e]
                storage._ENGINES.clear()
                storage._ENGINES.update(engines)
                storage._CHECKED.clear()
                storage._CHECKED.update(checked)
            for engine in created:
                engine.dispose()
        if internals:
            internals._PROBED.clear()
            internals._PROBED.update(probed)
