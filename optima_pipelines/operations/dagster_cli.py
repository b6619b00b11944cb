"""What Dagster's own one-off commands print in this deployment: one line for a bad request, and the
runs they executed.

``dagster asset materialize``, ``dagster job execute`` and ``dg launch`` execute their run in the
command's own process. Dagster answers a bad partition key, an unknown asset or a missing
``--partition`` with a 40-50-line traceback, and a successful run with no word of which run it was.
In such a process (``is_one_off_command``), the storage (orchestration/storage.py) installs:

- an exception hook that prints those errors as one line (``error: ...``) naming the bad value and
  the valid form (a partition key is explained by ``partitions.explain_bad_key``: its form, its date,
  its cabinet), exit code 1; any other exception keeps Dagster's traceback;
- a report at exit: each run this process executed, one line with its id, its status and the asset
  partitions it materialized.

``optima-pipelines dagster ...`` runs Dagster's command as a child process, which prints the same.
"""

from __future__ import annotations

import atexit
import difflib
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

#: Dagster's commands that execute a run in their own process: (program, words of the command).
ONE_OFF_COMMANDS = {("dagster", ("asset", "materialize")), ("dagster", ("job", "execute")), ("dg", ("launch",))}

_KEY_IN_MESSAGE = re.compile(r"partition key `([^`]*)`")
_ASSETS_IN_MESSAGE = re.compile(r"AssetKey\(s\) \[([^\]]*)\] were selected")
_installed: list[bool] = []


def program_and_words(argv: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """(``dagster`` | ``dg`` | another program, the command's words before its first option)."""
    first = argv[0] if argv else ""
    parts = first.replace("\\", "/").split("/")
    if parts[-1] == "__main__.py" and len(parts) > 1:  # python -m dagster / python -m dagster_dg_cli
        program = {"dagster": "dagster", "dagster_dg_cli": "dg"}.get(parts[-2], parts[-2])
    else:
        program = parts[-1]
    words = []
    for arg in argv[1:]:
        if arg.startswith("-"):
            break
        words.append(arg)
    return program, tuple(words)


def is_one_off_command(argv: Sequence[str] | None = None) -> bool:
    program, words = program_and_words(sys.argv if argv is None else argv)
    return any(program == p and words[: len(w)] == w for p, w in ONE_OFF_COMMANDS)


def option_value(argv: Sequence[str], *names: str) -> str | None:
    """The value of the first of ``names`` given in ``argv`` (``--name value`` or ``--name=value``)."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def install(storage: Any) -> None:
    """In a one-off command's process (once): the exception hook and the report at exit."""
    if _installed or not is_one_off_command():
        return
    _installed.append(True)
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        line = one_line(exc, storage=storage)
        if line is None:
            previous(kind, exc, tb)
        else:
            print(f"error: {line}", file=sys.stderr)

    sys.excepthook = hook
    since = time.time()
    atexit.register(report_runs, storage, since, os.getpid(), print)


def one_line(exc: BaseException, argv: Sequence[str] | None = None, storage: Any = None) -> str | None:
    """The one line for a bad request to a one-off command, or None for any other error."""
    from dagster import DagsterInvalidSubsetError, DagsterUnknownPartitionError

    from optima_pipelines.errors import OptimaError
    from optima_pipelines.orchestration.dagster_internals import CheckError

    argv = sys.argv if argv is None else argv
    message = str(exc).strip()
    if isinstance(exc, OptimaError):
        return message.splitlines()[0] if message else type(exc).__name__
    if isinstance(exc, DagsterInvalidSubsetError | DagsterUnknownPartitionError):
        key = _KEY_IN_MESSAGE.search(message)
        if key:
            return explain_partition_key(key.group(1), argv, storage)
        unknown = _ASSETS_IN_MESSAGE.search(message)
        if unknown:
            names = [n.strip().strip("'\"") for n in unknown.group(1).split(",")]
            return unknown_assets(names)
        return message.splitlines()[0]
    if isinstance(exc, CheckError):
        first = message.splitlines()[0].removeprefix("Failure condition: ").removeprefix("Invariant failed. ")
        if "no '--partition' option" in first:
            return f"{first}: add --partition CABINET|YYYY-MM-DD (or CABINET for the cabinet snapshots)"
        return first.removeprefix("Description: ")
    return None


def _asset_names() -> list[str]:
    from optima_pipelines.definitions import defs

    return sorted(k.to_user_string() for k in defs.get_repository_def().asset_graph.get_all_asset_keys())


def unknown_assets(names: list[str]) -> str:
    known = _asset_names()
    hints = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
    return (
        f"no asset named {', '.join(hints)}; `dagster asset list -m optima_pipelines.definitions` lists the "
        f"{len(known)} assets"
    )


def explain_partition_key(key: str, argv: Sequence[str], storage: Any = None) -> str:
    """``partitions.explain_bad_key`` for the assets the command selected, with what the deployment holds."""
    from datetime import date

    from dagster import AssetKey

    from optima_pipelines.definitions import defs
    from optima_pipelines.partitions import CABINET_DAY, CABINETS, CABINETS_NAME, explain_bad_key
    from optima_pipelines.settings import load_settings
    from optima_pipelines.timeutil import today_moscow

    selection = option_value(argv, "--select", "--assets") or ""
    graph = defs.get_repository_def().asset_graph
    partitions = None
    for name in (n.strip() for n in selection.split(",") if n.strip()):
        asset_key = AssetKey.from_user_string(name)
        if graph.has(asset_key):
            partitions = graph.get(asset_key).partitions_def
            break
    if partitions not in (CABINET_DAY, CABINETS):
        return f"partition key {key!r} names no partition of the selected assets"
    settings = load_settings()
    registered, with_partitions = _cabinets(settings, storage, CABINETS_NAME)

    return explain_bad_key(
        key,
        cabinet_day=partitions is CABINET_DAY,
        registered=registered,
        with_partitions=with_partitions,
        start=date.fromisoformat(settings.partitions_start),
        today=today_moscow(),
    )


def _cabinets(settings: Any, storage: Any, dynamic_name: str) -> tuple[set[str], set[str]]:
    """(the cabinets table's ids, the cabinets Dagster has partitions of); empty when unreadable."""
    from optima_pipelines.db.connection import connect

    registered: set[str] = set()
    with_partitions: set[str] = set()
    url = os.environ.get("OPTIMA_DATABASE_URL")
    try:
        if url:
            with connect(url, settings.warehouse_schema) as conn:
                registered = {r[0] for r in conn.execute("SELECT id FROM cabinets")}
        if storage is not None:
            with_partitions = set(storage.event_log_storage.get_dynamic_partitions(dynamic_name))
    except Exception:
        pass
    return registered, with_partitions


def report_runs(storage: Any, since: float, pid: int, echo: Callable[[str], None]) -> None:
    """One line per run this process (``pid``) executed since ``since``: id, status, what it materialized."""
    for line in run_lines(storage, since, pid):
        echo(line)


def run_lines(storage: Any, since: float, pid: int) -> list[str]:
    from datetime import UTC, datetime

    from dagster import DagsterEventType, RunsFilter

    try:
        records = storage.run_storage.get_run_records(
            filters=RunsFilter(created_after=datetime.fromtimestamp(since, UTC)), ascending=True
        )
        lines = []
        for record in records:
            run = record.dagster_run
            started = storage.event_log_storage.get_records_for_run(
                run.run_id, of_type=DagsterEventType.RUN_START, limit=1
            ).records
            if not started or started[0].event_log_entry.dagster_event.pid != pid:
                continue
            materialized = storage.event_log_storage.get_records_for_run(
                run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION, limit=1000
            ).records
            parts = []
            for r in materialized:
                event = r.event_log_entry.dagster_event
                name = event.asset_key.to_user_string()
                parts.append(f"{name} {event.partition}" if event.partition else name)
            done = ", ".join(dict.fromkeys(parts)) or "nothing"
            lines.append(f"run {run.run_id}: {run.status.value}, materialized {done}")
        return lines
    except Exception as exc:
        return [f"(the runs of this command could not be read back: {type(exc).__name__})"]
