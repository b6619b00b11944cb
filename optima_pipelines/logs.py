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
records that reach the handler it sits on, and Dagster attaches handlers of its own.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

ROOT_LOGGER = "optima_pipelines"
LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s run_id=%(run_id)s cabinet=%(cabinet)s %(message)s"
UNKNOWN = "-"
MASK = "<redacted>"

#: WB tokens are JWTs: three base64url segments, the first one a JSON header ("eyJ" = '{"').
JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")

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
            record.run_id, record.cabinet = UNKNOWN, UNKNOWN
            return record
        _in_factory.active = True
        try:
            run_id, cabinet = _run_id.get(), _cabinet.get()
            if run_id is None:
                run_id, derived = _current_dagster_context()
                cabinet = cabinet or derived
            record.run_id = run_id or UNKNOWN
            record.cabinet = cabinet or UNKNOWN
            _scrub(record)
        finally:
            _in_factory.active = False
        return record

    factory.optima = True  # type: ignore[attr-defined]
    return factory


def install(level: int = logging.INFO) -> None:
    """Install correlation and redaction for this process, and print our loggers' lines to stderr. Idempotent."""
    global _installed
    if _installed:
        return
    current = logging.getLogRecordFactory()
    if not getattr(current, "optima", False):
        logging.setLogRecordFactory(_wrap_factory(current))
    logger = logging.getLogger(ROOT_LOGGER)
    if not any(getattr(h, "optima", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LINE_FORMAT))
        handler.optima = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(level)
    _installed = True


def get_logger(name: str) -> logging.Logger:
    """A logger under ``optima_pipelines`` (pass ``__name__``)."""
    return logging.getLogger(name if name.startswith(ROOT_LOGGER) else f"{ROOT_LOGGER}.{name}")
