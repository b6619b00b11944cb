"""The raw landing: every WB answer a sync decodes, kept as it came, in Parquet (docs/landing.md).

The WB client (wb/http.py ``Transport.call``) hands each 2xx answer of a read to ``Landing.land``
before it decodes it, with the request (endpoint, query parameters, JSON body; never a header, so
never the token). ``land`` appends the answer to the process's *spool*, an Arrow IPC stream on
local disk, and returns only once it is written there: an answer that could not be landed raises
``LandingError`` and its page is never merged. The spool becomes Parquet when the run's WB resource
is torn down (``flush``; a spool above ``FLUSH_BYTES`` earlier): one file per feed and Moscow day
of everything the process landed meanwhile, rows sorted by cabinet, so a sweep over 1,000
cabinets writes a few files, not thousands. A spool whose process died (its lock is free) is
flushed by the next ``flush`` or ``recover`` (the nightly partition manager, a replay).

The dataset: ``<root>/feed=<feed>/day=<YYYY-MM-DD>/part-<utc stamp>-<id>.parquet`` (hive
partitioning), zstd-compressed, schema ``ANSWER_SCHEMA`` with its version in the file's metadata
(``optima_landing_version``). ``<root>`` is a local folder or a pyarrow filesystem URL
(``OPTIMA_LANDING_URL``; ``s3://bucket/prefix?endpoint_override=...`` with the usual AWS_*
credentials in the environment). ``prune`` drops the day folders past the retention.
"""

from __future__ import annotations

import atexit
import fcntl
import itertools
import json
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from optima_pipelines.errors import ConfigError, OptimaError
from optima_pipelines.logs import get_logger
from optima_pipelines.timeutil import MOSCOW

log = get_logger(__name__)

#: The landing's format version, in every file's metadata. A replay refuses any other.
SCHEMA_VERSION = 1
VERSION_KEY = b"optima_landing_version"

#: What one landed answer holds (``feed`` and ``day`` are the dataset's partition folders).
ANSWER_SCHEMA = pa.schema(
    [
        pa.field("cabinet_id", pa.string(), nullable=False),
        pa.field("run_id", pa.string()),
        pa.field("invocation", pa.string()),
        pa.field("sync", pa.string()),
        pa.field("sync_input", pa.string()),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("received_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("limit_group", pa.string(), nullable=False),
        pa.field("params", pa.string()),
        pa.field("request_body", pa.binary()),
        pa.field("status", pa.int16(), nullable=False),
        pa.field("answer", pa.binary(), nullable=False),
        pa.field("feed", pa.string(), nullable=False),
        pa.field("day", pa.date32(), nullable=False),
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)
PARTITION_COLUMNS = ("feed", "day")
#: The columns of a Parquet file (the partition columns are its folders).
FILE_SCHEMA = pa.schema([f for f in ANSWER_SCHEMA if f.name not in PARTITION_COLUMNS], metadata=ANSWER_SCHEMA.metadata)

#: The feed an answer lands in, by the endpoint's WB limit group (wb/client.py's endpoints).
FEEDS: dict[str, str] = {
    "statistics.orders": "orders",
    "statistics.sales": "sales",
    "finance.detailed": "finance",
    "advert.count": "ads",
    "advert.adverts": "ads",
    "advert.fullstats": "ads",
    "advert.bids_min": "ads",
    "analytics.funnel": "funnel",
    "analytics.stocks": "stocks",
    "content": "catalog",
    "prices": "prices",
    "feedbacks": "feedbacks",
    "common.acceptance": "acceptance",
    "common.news": "news",
}
ALL_FEEDS = tuple(sorted(set(FEEDS.values())))


def feed_of(limit_group: str) -> str:
    """The feed of an endpoint's limit group (a ping lands as ``ping``)."""
    return FEEDS.get(limit_group) or limit_group.split(".")[0].replace("_", "-")


#: The spool is flushed to Parquet when it grows past this many bytes (and at the end of every run).
FLUSH_BYTES = 64 * 1024 * 1024
#: Answers per Parquet row group: a reader filtering by cabinet skips the groups of other cabinets.
ROW_GROUP_ROWS = 256


class LandingError(OptimaError):
    """The landing could not keep or give back an answer: names the file or folder concerned."""


# -- what the running sync is (a contextvar set by sync.runs.run_sync) ----------------------------


@dataclass(frozen=True)
class SyncContext:
    """The sync entry point whose WB answers are being landed, and what it was given."""

    invocation: str
    sync: str | None
    run_id: str | None
    #: JSON of the replayable SyncInput fields (cabinet_id, trigger, window_days, date_from, day,
    #: backfill_id, options) and ``started_at``, when the invocation began (a replay's clock).
    inputs: str


_CONTEXT: ContextVar[SyncContext | None] = ContextVar("optima_landing_sync", default=None)


@contextmanager
def sync_context(sync: str | None, run_id: str | None, inputs: Mapping[str, Any]) -> Iterator[SyncContext]:
    """Answers landed in the block (this thread) belong to one invocation of ``sync``."""
    described = {**inputs, "started_at": datetime.now(UTC).isoformat()}
    ctx = SyncContext(uuid.uuid4().hex, sync, run_id, json.dumps(described, sort_keys=True, default=str))
    token = _CONTEXT.set(ctx)
    try:
        yield ctx
    finally:
        _CONTEXT.reset(token)


def current_context() -> SyncContext | None:
    return _CONTEXT.get()


# -- where --------------------------------------------------------------------------------------


def resolve(url: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, root path) of a landing URL: a local folder (made if missing) or any URL pyarrow's
    filesystems take (``s3://bucket/prefix?endpoint_override=http://host:port&scheme=http``)."""
    if "://" not in url or url.startswith("file://"):
        root = Path(url.removeprefix("file://")).expanduser().resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"OPTIMA_LANDING_URL {url!r}: cannot create the folder: {exc.strerror}") from None
        return pafs.LocalFileSystem(), root.as_posix()
    try:
        fs, path = pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise ConfigError(f"OPTIMA_LANDING_URL is not a filesystem URL pyarrow can open: {exc}") from None
    return fs, path.rstrip("/")


def describe_url(url: str) -> str:
    """The URL without its query (where an endpoint or a key could be) for messages."""
    return url.split("?", 1)[0]


_seq = itertools.count(1)


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


class _Spool:
    """One process's open spool: an Arrow IPC stream, locked (flock) for as long as it is open."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.pid = os.getpid()
        self.path = directory / f"spool-{self.pid}-{uuid.uuid4().hex[:12]}.arrows"
        self.file: IO[bytes] = open(self.path, "xb")
        fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.writer = pa.ipc.new_stream(self.file, ANSWER_SCHEMA)
        self.rows = 0
        self.bytes = 0

    def append(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.file.flush()  # in the OS: it outlives this process
        self.rows += batch.num_rows
        self.bytes += batch.nbytes

    def close(self) -> None:
        self.writer.close()
        self.file.flush()


def read_spool(path: Path) -> pa.Table:
    """Every complete answer of a spool (a process that died mid-append leaves a torn last one, dropped)."""
    batches: list[pa.RecordBatch] = []
    with open(path, "rb") as f:
        try:
            reader = pa.ipc.open_stream(f)
            for batch in reader:
                batches.append(batch)
        except (pa.ArrowInvalid, OSError) as exc:
            if batches or f.tell() > 0:
                log.warning(f"landing spool {path.name}: a torn last answer was dropped ({exc})")
    return pa.Table.from_batches(batches, schema=ANSWER_SCHEMA)


class Landing:
    """The landing of one deployment: ``land`` answers (thread-safe), ``flush`` them to Parquet,
    read them back (``read``), ``prune`` what is past the retention."""

    def __init__(self, url: str, spool_dir: Path, *, flush_bytes: int = FLUSH_BYTES):
        self.url = url
        self.fs, self.root = resolve(url)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.spool_dir = spool_dir
        self.flush_bytes = flush_bytes
        self._lock = threading.RLock()
        self._spool: _Spool | None = None

    def __repr__(self) -> str:
        return f"Landing({describe_url(self.url)!r})"

    # -- writing ----------------------------------------------------------------------------------

    def land(
        self,
        cabinet_id: str,
        *,
        method: str,
        category: str,
        path: str,
        limit_group: str,
        params: Mapping[str, Any] | None,
        request_body: bytes | None,
        status: int,
        answer: bytes,
        received_at: datetime | None = None,
    ) -> None:
        """Keep one answer (in the spool); raises LandingError if it could not be written."""
        ctx = _CONTEXT.get()
        at = received_at or datetime.now(UTC)
        row = {
            "cabinet_id": [cabinet_id],
            "run_id": [ctx.run_id if ctx else None],
            "invocation": [ctx.invocation if ctx else None],
            "sync": [ctx.sync if ctx else None],
            "sync_input": [ctx.inputs if ctx else None],
            "seq": [next(_seq)],
            "received_at": [at],
            "method": [method],
            "category": [category],
            "path": [path],
            "limit_group": [limit_group],
            "params": [_json(dict(params)) if params else None],
            "request_body": [request_body],
            "status": [status],
            "answer": [answer],
            "feed": [feed_of(limit_group)],
            "day": [at.astimezone(MOSCOW).date()],
        }
        batch = pa.RecordBatch.from_pydict(row, schema=ANSWER_SCHEMA)
        with self._lock:
            try:
                spool = self._open_spool()
                spool.append(batch)
            except OSError as exc:
                raise LandingError(
                    f"could not land WB's answer to {method} {category} {path} for cabinet {cabinet_id!r} in "
                    f"{self.spool_dir}: {exc.strerror or exc}; the page is not merged"
                ) from None
            full = spool.bytes >= self.flush_bytes
        if full:
            self.flush()

    def _open_spool(self) -> _Spool:
        if self._spool is not None and self._spool.pid != os.getpid():
            self._spool = None  # a forked child: the parent's spool stays the parent's
        if self._spool is None:
            self._spool = _Spool(self.spool_dir)
        return self._spool

    def flush(self) -> list[str]:
        """Turn this process's spool, and any spool whose process is gone, into Parquet. Returns the
        files written. A spool that cannot be written stays (the next flush tries it again)."""
        written: list[str] = []
        with self._lock:
            spool = self._spool
            if spool is not None and spool.pid == os.getpid():
                self._spool = None
                spool.close()
                try:
                    written += self._publish(spool.path)
                finally:
                    spool.file.close()  # releases the lock: a failed spool is an orphan, recovered later
        written += self.recover()
        return written

    def recover(self) -> list[str]:
        """Publish the spools whose process is gone (their lock is free)."""
        written: list[str] = []
        if not self.spool_dir.is_dir():
            return written
        for path in sorted(self.spool_dir.glob("spool-*.arrows")):
            own = self._spool is not None and self._spool.path == path
            if own:
                continue
            try:
                f = open(path, "rb")
            except FileNotFoundError:
                continue  # another process published it
            try:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its process is still landing into it
                if not path.exists():
                    continue
                written += self._publish(path)
            finally:
                f.close()
        return written

    def _publish(self, spool_path: Path) -> list[str]:
        table = read_spool(spool_path)
        written = self.write(table) if table.num_rows else []
        spool_path.unlink(missing_ok=True)
        return written

    def write(self, table: pa.Table) -> list[str]:
        """Write answers (``ANSWER_SCHEMA``) as one Parquet file per (feed, day), sorted by cabinet
        and arrival. A local file appears under its name only once complete."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        part = uuid.uuid4().hex[:12]
        table = table.sort_by(
            [("feed", "ascending"), ("day", "ascending"), ("cabinet_id", "ascending"), ("seq", "ascending")]
        )
        keys = table.select(["feed", "day"]).group_by(["feed", "day"]).aggregate([]).to_pylist()
        written = []
        for key in keys:
            mask = pc.and_(
                pc.equal(table["feed"], key["feed"]), pc.equal(table["day"], pa.scalar(key["day"], pa.date32()))
            )
            rows = table.filter(mask).drop_columns(list(PARTITION_COLUMNS)).cast(FILE_SCHEMA)
            folder = f"{self.root}/feed={key['feed']}/day={key['day'].isoformat()}"
            name = f"part-{stamp}-{part}.parquet"
            try:
                if self.local:  # an object store has no folders to make (S3 would get marker objects)
                    self.fs.create_dir(folder, recursive=True)
                target = f"{folder}/{name}"
                temp = f"{folder}/.{name}.tmp" if self.local else target
                pq.write_table(
                    rows,
                    temp,
                    filesystem=self.fs,
                    compression="zstd",
                    row_group_size=ROW_GROUP_ROWS,
                    use_dictionary=[
                        "cabinet_id",
                        "run_id",
                        "invocation",
                        "sync",
                        "sync_input",
                        "method",
                        "category",
                        "path",
                        "limit_group",
                    ],
                )
                if temp != target:
                    self.fs.move(temp, target)
            except OSError as exc:
                raise LandingError(
                    f"could not write the landed answers to {describe_url(self.url)}/feed={key['feed']}/day={key['day']}: {exc}"
                ) from None
            written.append(target)
        log.info(f"landing: {table.num_rows} answer(s) in {len(written)} file(s) under {describe_url(self.url)}")
        return written

    # -- reading ----------------------------------------------------------------------------------

    def files(
        self, feeds: Iterable[str] | None = None, first: date | None = None, last: date | None = None
    ) -> list[str]:
        """The Parquet files of these feeds (None: all) whose day is within [first, last]."""
        wanted = set(feeds) if feeds is not None else None
        out = []
        try:
            feed_dirs = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        except OSError as exc:
            raise LandingError(f"cannot list the landing {describe_url(self.url)}: {exc}") from None
        for day, day_dir in self._day_dirs(feed_dirs, wanted):
            if (first and day < first) or (last and day > last):
                continue
            for f in self.fs.get_file_info(pafs.FileSelector(day_dir.path)):
                if (
                    f.type == pafs.FileType.File
                    and f.base_name.endswith(".parquet")
                    and not f.base_name.startswith((".", "_"))
                ):
                    out.append(f.path)
        return sorted(out)

    def _day_dirs(
        self, feed_dirs: Iterable[pafs.FileInfo], wanted: set[str] | None = None
    ) -> Iterator[tuple[date, pafs.FileInfo]]:
        """(day, folder) of each ``feed=<feed>/day=<YYYY-MM-DD>`` folder under the root's ``feed_dirs``
        (of the ``wanted`` feeds; None: all); anything else there is passed over."""
        for feed_dir in feed_dirs:
            name = feed_dir.base_name
            if feed_dir.type != pafs.FileType.Directory or not name.startswith("feed="):
                continue
            if wanted is not None and name.removeprefix("feed=") not in wanted:
                continue
            for day_dir in self.fs.get_file_info(pafs.FileSelector(feed_dir.path)):
                try:
                    day = date.fromisoformat(day_dir.base_name.removeprefix("day="))
                except ValueError:
                    continue
                yield day, day_dir

    def read_file(self, path: str, cabinet_id: str | None = None) -> pa.Table:
        """One landed file's answers (of one cabinet), with its feed and day; LandingError naming the
        file when it is not a landing file of this version."""
        try:
            schema = pq.read_schema(path, filesystem=self.fs)
            meta = schema.metadata or {}
            version = meta.get(VERSION_KEY)
            if version != str(SCHEMA_VERSION).encode():
                found = version.decode(errors="replace") if version else "none"
                raise LandingError(
                    f"landed file {path} has landing schema version {found}, this replay reads version {SCHEMA_VERSION}: refused"
                )
            filters = [("cabinet_id", "=", cabinet_id)] if cabinet_id is not None else None
            table = pq.read_table(path, filesystem=self.fs, filters=filters, schema=FILE_SCHEMA)
        except LandingError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise LandingError(f"landed file {path} is unreadable (corrupt or not Parquet): {exc}") from None
        feed, day = _partition_of(path)
        n = table.num_rows
        return table.append_column("feed", pa.array([feed] * n, pa.string())).append_column(
            "day", pa.array([day] * n, pa.date32())
        )

    def read(
        self,
        cabinet_id: str | None,
        first: date | None = None,
        last: date | None = None,
        feeds: Iterable[str] | None = None,
    ) -> pa.Table:
        """Every answer landed for ``cabinet_id`` (None: all) in these days and feeds, in arrival order."""
        tables = [self.read_file(p, cabinet_id) for p in self.files(feeds, first, last)]
        if not tables:
            return ANSWER_SCHEMA.empty_table()
        table = pa.concat_tables(tables).cast(ANSWER_SCHEMA)
        return table.sort_by([("received_at", "ascending"), ("seq", "ascending")])

    # -- retention --------------------------------------------------------------------------------

    def prune(self, keep_days: int, today: date) -> list[str]:
        """Delete the day folders older than ``keep_days`` before ``today``; returns them."""
        oldest = today - timedelta(days=keep_days)
        gone = []
        for day, day_dir in self._day_dirs(self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))):
            if day < oldest:
                self.fs.delete_dir(day_dir.path)
                gone.append(day_dir.path)
        return gone


def _partition_of(path: str) -> tuple[str, date]:
    parts = path.split("/")
    try:
        feed = next(p for p in parts if p.startswith("feed=")).removeprefix("feed=")
        day = date.fromisoformat(next(p for p in parts if p.startswith("day=")).removeprefix("day="))
    except (StopIteration, ValueError):
        raise LandingError(f"landed file {path} is not under feed=<feed>/day=<YYYY-MM-DD>") from None
    return feed, day


# -- the process's landing -------------------------------------------------------------------------

_landings: dict[tuple[str, str], Landing] = {}
_landings_lock = threading.Lock()


def landing_for(url: str | None, spool_dir: Path) -> Landing | None:
    """The process's landing for this URL (one spool per process); None when the landing is off."""
    if url is None:
        return None
    key = (url, str(spool_dir))
    with _landings_lock:
        landing = _landings.get(key)
        if landing is None:
            landing = _landings[key] = Landing(url, spool_dir)
        return landing


def process_landing() -> Landing | None:
    """The landing the settings ask for (OPTIMA_LANDING_URL), or None when it is off."""
    from optima_pipelines.settings import load_settings

    settings = load_settings()
    return landing_for(settings.landing_url, settings.landing_spool_dir)


@atexit.register
def _flush_at_exit() -> None:
    for landing in list(_landings.values()):
        try:
            landing.flush()
        except LandingError as exc:  # the spool stays: the next flush or recover publishes it
            log.warning(str(exc))
        except OSError as exc:  # its folder is gone (a test's or a bench's temporary state): nothing to keep
            log.warning("the landing spool could not be published at exit: %s", exc)
