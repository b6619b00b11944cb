"""The WB sync jobs: one cabinet per run (``cabinet_sync_job``) or many (``sweep_job``).

- ``cabinet_sync_job``: a one-op job that syncs one cabinet (``CabinetSyncConfig``), for the runs a
  person or a request asks for, a resume after a WB pause and a retry: checks the cabinet, marks
  its request running, takes the cabinet lock (waiting for another run's work on the cabinet, at
  most OPTIMA_CABINET_LOCK_WAIT_SECONDS), calls the sync's Dagster-free entry point (``spec.body``,
  a ``sync.runs.Sync``) with a ``SyncInput``, records one materialization per changed `cabinet|day`
  (or cabinet) partition, and ends the request. A WB pause beyond the client's wait ends a
  scheduled run successfully (the pause is in sync_state and the resume sensor runs it again); a
  request (a person waiting) fails with the reason instead.
- ``sweep_job``: the scheduled cadences' run: one run per cadence window over every due cabinet (a
  shard of at most OPTIMA_SWEEP_SHARD_SIZE), OPTIMA_SWEEP_THREADS cabinets at once. Each cabinet's
  work is the same entry point under the cabinet lock, *tried*, not waited for: a cabinet whose
  lock another run holds is tried again later in the sweep and, still held after
  OPTIMA_SWEEP_BUSY_WAIT_SECONDS, skipped as account-busy. Every cabinet's outcome is a row of
  ``sweep_outcomes`` (/metrics) and a line of the run's log naming the cabinet; the run's
  ``optima/sweep-outcome`` tag counts them. Each changed partition is materialized with the same
  metadata as a single-cabinet run's.

One cabinet's trouble stays its own. What WB did to one cabinet (a revoked token, a 5xx after the
client's retries, a malformed answer, a pause) is recorded on that cabinet and the others go on:
a short pause (``RESUME_WITHIN``) is waited out by the sweep, which does the cabinet again after
it (no resume run); a longer one is ``deferred`` (the resume sensor runs the cabinet again when WB
allows), transient
trouble is ``retrying`` (its sync_state gets a resume time ``RETRY_AFTER`` ahead, so the resume
sensor retries it as a single-cabinet run with the scheduled retry policy, well before the next
window of a nightly cadence; work without a resume state, the auto-replies, is tried again by the
next window), permanent trouble is ``failed`` and marks the cabinet as a single run
would (a rejected token: token_invalid). A sweep fails (red in the UI) only when a cabinet failed
for a reason that is not the cabinet's own (a bug, the warehouse), after every cabinet was tried.
"""

# No "from __future__ import annotations": Dagster reads op config and resource types from live annotations.
import heapq
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from dagster import (
    Config,
    DagsterInstance,
    DagsterRunStatus,
    Failure,
    JobDefinition,
    OpExecutionContext,
    RetryPolicy,
    RunsFilter,
    job,
    op,
)
from pydantic import Field

from optima_pipelines import logs
from optima_pipelines.changes import FeedChange
from optima_pipelines.errors import InvalidInput, OptimaError, UnknownCabinet
from optima_pipelines.orchestration.materializations import emit_cabinet, emit_days, ensure_cabinet_partitions
from optima_pipelines.orchestration.queues import (
    PRIORITY_SCHEDULED,
    PRIORITY_USER,
    SWEEP_OUTCOMES,
    TAG_CABINET,
    TAG_PRIORITY,
    TAG_SWEEP_OUTCOME,
    TAG_TRIGGER,
    queue_tags,
)
from optima_pipelines.orchestration.retries import (
    DEFAULT_RETRY,
    INTERACTIVE_MAX_WAIT_SECONDS,
    SCHEDULED_RETRY,
    describe,
    fail_on_permanent,
    is_transient,
)
from optima_pipelines.orchestration.runconfig import op_name
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.resources.wb import WbApi, lazy_client
from optima_pipelines.settings import load_settings
from optima_pipelines.sync.runs import FeedLoad, Sync, SyncInput, feed_changes, record_failure, run_sync, stored_runs
from optima_pipelines.sync.state import mark_deferred
from optima_pipelines.warehouse import requests as outbox
from optima_pipelines.warehouse.cabinet_lock import CabinetLock, LockSession, held
from optima_pipelines.warehouse.cabinets import get_cabinet
from optima_pipelines.wb import WbClient, WbDeferred, WbError

log = logs.get_logger(__name__)

#: A sweep's cabinet that failed transiently is retried by a single-cabinet run this much later.
RETRY_AFTER = timedelta(seconds=60)
#: A sweep records the materializations and outcomes of its finished cabinets at most this often (seconds).
EMIT_EVERY = 15.0
#: A WB pause this short (seconds) is waited out by the sweep, which does the cabinet again after
#: it, at most MAX_RESUMES times; a longer one is left to the resume sensor (a single-cabinet run).
RESUME_WITHIN = 90.0
MAX_RESUMES = 3


class CabinetSyncConfig(Config):
    cabinet_id: str
    #: The request row a run serves (set by the requests sensor).
    request_id: int | None = None
    #: Days back to cover, today included, for the syncs that work on a window of days (ads, the
    #: funnel, the digitization backfill): None is their cadence's own window; more catches up a
    #: new cabinet (the demo does). WB keeps statistics 90 days (fullstats: 31 a request).
    window_days: int | None = Field(default=None, ge=1, le=90)
    #: First Moscow day to load (a user's feed import), YYYY-MM-DD.
    date_from: str | None = None

    def first_day(self) -> date | None:
        if self.date_from is None:
            return None
        try:
            return date.fromisoformat(self.date_from)
        except ValueError:
            raise InvalidInput(f"date_from {self.date_from!r} is not a date (YYYY-MM-DD)") from None


class SweepConfig(Config):
    """The cabinets of one sweep run (the sensor's shard of the window's due cabinets)."""

    cabinet_ids: list[str] = Field(min_length=1)
    #: The cadence window (an interval sensor's window number or a schedule's tick), for the log.
    window: str = ""


def run_trigger(tags: dict[str, str], user_trigger: str) -> str:
    """The trigger metadata of a job run: scheduled, the request's own, or manual (Launchpad, CLI)."""
    return {"schedule": "scheduled", "user": user_trigger, "backfill": "backfill"}.get(
        tags.get(TAG_TRIGGER, ""), "manual"
    )


def user_run_waiting(instance: DagsterInstance, cabinet_id: str) -> Callable[[], bool]:
    """Whether a user's run (higher priority) waits in the queue for this cabinet: a scheduled
    load yields the cabinet at its next page boundary (the original's rule)."""

    def waiting() -> bool:
        runs = instance.get_runs(
            RunsFilter(statuses=[DagsterRunStatus.QUEUED], tags={TAG_CABINET: cabinet_id}), limit=20
        )
        return any(int(r.tags.get(TAG_PRIORITY, "0")) > PRIORITY_SCHEDULED for r in runs)

    return waiting


@dataclass(frozen=True)
class SyncJobSpec:
    """A sync of one cabinet, run by ``cabinet_sync_job`` and, for the scheduled ones, ``sweep_job``.
    ``user_trigger`` (``user_import`` or ``manual``) makes it a job people wait on: user priority,
    the interactive WB wait, default retries, and a WB pause that outlasts the wait fails the run
    (and its request) instead of deferring. ``feeds`` name the assets it writes (for failure
    figures); those in ``cabinet_partitioned`` are materialized by cabinet, the others by
    `cabinet|day`. A load that records its own failure figures (the digitization feeds') names no
    ``feeds``. ``state_feed`` is the sync_state row a pause is kept in; ``resume_feed`` (default:
    ``state_feed``) the one whose resume time retries a sweep's cabinet that failed transiently."""

    name: str
    queue: str
    feeds: tuple[str, ...]
    body: Sync
    description: str
    state_feed: str | None = None
    user_trigger: str | None = None
    cabinet_partitioned: tuple[str, ...] = ()
    resume_feed: str | None = None
    #: Work a single-cabinet run does with what the sync changed (its change records) before
    #: recording its materializations (a user's import recomputes its РНП days: assets.rnp.recompute_in_run).
    after_sync: Callable[[OpExecutionContext, Warehouse, list[FeedChange]], None] | None = None

    @property
    def user(self) -> bool:
        return self.user_trigger is not None

    @property
    def retry(self) -> RetryPolicy:
        return DEFAULT_RETRY if self.user else SCHEDULED_RETRY

    @property
    def tags(self) -> dict[str, str]:
        return queue_tags(self.queue, priority=PRIORITY_USER) if self.user else queue_tags(self.queue)

    @property
    def sweep_name(self) -> str:
        return f"{self.name}_sweep"

    def emit(self, context: OpExecutionContext, runs: Iterable[FeedLoad], trigger: str, request_id: int | None) -> None:
        """The materializations of what ``runs`` changed: cabinet snapshots by cabinet, feeds by day."""
        runs = list(runs)
        for run in runs:
            if run.feed in self.cabinet_partitioned and run.changed:
                emit_cabinet(context, run.total(trigger, request_id))
        days = [r for r in runs if r.feed not in self.cabinet_partitioned]
        emit_days(context, feed_changes(days, trigger, request_id))


@dataclass
class _Published:
    """``spec.after_sync`` of a cabinet sync, done again only when the loads changed something since:
    a user's import publishes its РНП days as its pages land (``SyncInput.on_progress``), and once
    more at the end only if the last page (WB's empty one, a minute later for sales) brought rows."""

    spec: SyncJobSpec
    context: OpExecutionContext
    warehouse: Warehouse
    trigger: str
    request_id: int | None
    done: tuple[Any, ...] | None = None

    def after(self, runs: list[FeedLoad]) -> None:
        if self.spec.after_sync is None:
            return
        state = tuple(
            (r.feed, r.merge.inserted, r.merge.updated, r.rows_deleted, frozenset(r.report_days)) for r in runs
        )
        if state != self.done:
            self.spec.after_sync(self.context, self.warehouse, feed_changes(runs, self.trigger, self.request_id))
            self.done = state


def run_cabinet_sync(
    spec: SyncJobSpec, context: OpExecutionContext, config: CabinetSyncConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    """The op of a cabinet sync job (see the module docstring)."""
    cabinet_id = config.cabinet_id
    trigger = run_trigger(dict(context.run.tags), spec.user_trigger or "manual")
    stack = ExitStack()
    notes: dict[str, Any] = {}
    published = _Published(spec, context, warehouse, trigger, config.request_id)
    try:
        with warehouse.connect() as conn:
            get_cabinet(conn, cabinet_id)
            if config.request_id is not None:
                outbox.mark_running(conn, config.request_id, context.run_id)
                conn.commit()
        ensure_cabinet_partitions(context, [cabinet_id])
        with stack:
            lock = stack.enter_context(held(warehouse.connect, cabinet_id, load_settings().cabinet_lock_wait_seconds))
            inp = SyncInput(
                connect=warehouse.connect,
                client=lazy_client(wb, cabinet_id, INTERACTIVE_MAX_WAIT_SECONDS if spec.user else None, stack),
                cabinet_id=cabinet_id,
                run_id=context.run_id,
                trigger=trigger,
                request_id=config.request_id,
                window_days=config.window_days,
                date_from=config.first_day(),
                options=config.model_dump(exclude={"cabinet_id", "request_id", "window_days", "date_from"}),
                notes=notes,
            )
            if not spec.user:
                queued = user_run_waiting(context.instance, cabinet_id)
                inp.should_yield = lambda: lock.waited_for() or queued()
            if spec.after_sync is not None:
                inp.on_progress = published.after
            runs = run_sync(spec.body, inp)
    except WbDeferred as deferred:  # a pause before any feed could store its state
        if spec.state_feed is not None and not spec.user:
            with warehouse.connect() as conn, conn.transaction():
                mark_deferred(conn, cabinet_id, spec.state_feed, deferred.resume_at, str(deferred))
            context.log.info(f"{spec.name} of {cabinet_id} deferred: {deferred}")
            return
        raise Failure(description=f"{spec.name} of cabinet {cabinet_id}: {deferred}", allow_retries=False) from None
    except Exception as exc:
        # Pages committed before the failure stay: report the days they changed (the retry, or the
        # next run, resumes after them).
        stored = [r for r in stored_runs(exc) if r.feed not in spec.cabinet_partitioned]
        emit_days(context, feed_changes(stored, trigger, config.request_id))
        will_retry = is_transient(exc) and context.retry_number < (spec.retry.max_retries or 0)
        if not will_retry:
            failed = [FeedLoad(spec.queue, f, cabinet_id, context.run_id, trigger) for f in spec.feeds]
            record_failure(warehouse.connect, failed, exc)
        fail_on_permanent(exc, f"{spec.name} of cabinet {cabinet_id}")
        raise
    published.after(runs)
    spec.emit(context, runs, trigger, config.request_id)
    result: dict[str, Any] = {run.feed: run.summary() for run in runs} | notes
    context.log.info(f"{spec.name} of {cabinet_id}: {result}")
    deferred_runs = [r for r in runs if r.deferred_until is not None]
    if spec.user and deferred_runs:
        first = deferred_runs[0]
        raise Failure(
            description=f"WB paused {spec.name} of cabinet {cabinet_id} until {first.deferred_until}: "
            f"{first.deferred_reason}; what was loaded before stays",
            allow_retries=False,
        )
    if config.request_id is not None:
        with warehouse.connect() as conn:
            outbox.mark_succeeded(conn, config.request_id, context.run_id, result)
            conn.commit()


@contextmanager
def locked_client(
    warehouse: Warehouse, wb: WbApi, cabinet_id: str, max_wait_seconds: float | None = None
) -> Iterator[WbClient]:
    """The cabinet's WB client under the cabinet lock, for the engines' single-cabinet runs: waits for
    another run's work on the cabinet as ``cabinet_sync_job`` does (OPTIMA_CABINET_LOCK_WAIT_SECONDS)."""
    with (
        held(warehouse.connect, cabinet_id, load_settings().cabinet_lock_wait_seconds),
        wb.client(cabinet_id, max_wait_seconds) as client,
    ):
        yield client


def cabinet_sync_job(spec: SyncJobSpec, config_type: type[CabinetSyncConfig] = CabinetSyncConfig) -> JobDefinition:
    """The one-op job of ``spec``, configured by ``config_type``: ``CabinetSyncConfig``, or a subclass
    whose own fields (the report import's file) reach the sync as ``SyncInput.options``."""

    def body(context: OpExecutionContext, config: CabinetSyncConfig, warehouse: Warehouse, wb: WbApi) -> None:
        run_cabinet_sync(spec, context, config, warehouse, wb)

    body.__annotations__["config"] = config_type  # Dagster reads the op's config schema from it
    _op = op(name=op_name(spec.name), retry_policy=spec.retry, description=spec.description)(body)

    @job(name=spec.name, tags=spec.tags, description=spec.description)
    def _job() -> None:
        _op()

    return _job


# -- Sweeps --------------------------------------------------------------------------------------


@dataclass
class CabinetOutcome:
    """What one cabinet of a sweep came to (``OUTCOMES``), with the runs of what it changed."""

    cabinet_id: str
    outcome: str
    reason: str | None = None
    runs: list[FeedLoad] = field(default_factory=list)
    #: What the work told besides its feeds (``SyncInput.notes``: an engine's figures).
    notes: dict[str, Any] = field(default_factory=dict)
    #: A failure that is not the cabinet's own (a bug, the warehouse): the sweep fails at its end.
    systemic: bool = False
    #: Deferred: when WB lets the cabinet go on (the sweep comes back then if that is soon).
    resume_at: datetime | None = None
    #: False for an outcome the sweep goes on from (a short WB pause): counted and recorded once final.
    final: bool = True
    #: When the cabinet's work came to this (outcomes are written in batches, later).
    finished_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def busy(self) -> bool:
        return self.outcome == "skipped" and self.reason == BUSY


BUSY = "account-busy: another run holds the cabinet"


def _cabinet_work(
    spec: SyncJobSpec, cabinet_id: str, run_id: str, warehouse: Warehouse, wb: WbApi, lock: CabinetLock
) -> CabinetOutcome:
    """One cabinet's sync inside a sweep, under its lock (held by the caller)."""
    try:
        with warehouse.connect() as conn:
            cabinet = get_cabinet(conn, cabinet_id)
        if not cabinet.active:
            return CabinetOutcome(cabinet_id, "skipped", f"the cabinet is {cabinet.status} now")
        notes: dict[str, Any] = {}
        with ExitStack() as stack:
            inp = SyncInput(
                connect=warehouse.connect,
                client=lazy_client(wb, cabinet_id, None, stack),
                cabinet_id=cabinet_id,
                run_id=run_id,
                trigger="scheduled",
                should_yield=lock.waited_for,
                notes=notes,
            )
            runs = run_sync(spec.body, inp)
    except WbDeferred as deferred:  # paused before any feed could store its state
        if spec.state_feed is not None:
            with warehouse.connect() as conn, conn.transaction():
                mark_deferred(conn, cabinet_id, spec.state_feed, deferred.resume_at, str(deferred))
        return CabinetOutcome(cabinet_id, "deferred", str(deferred), resume_at=deferred.resume_at)
    except Exception as exc:
        stored = stored_runs(exc)
        reason = logs.redact(f"{exc.__class__.__name__}: {describe(exc)}")
        retry_feed = spec.resume_feed or spec.state_feed
        failed = [FeedLoad(spec.queue, f, cabinet_id, run_id, "scheduled") for f in spec.feeds]
        if is_transient(exc) and retry_feed is None:  # no resume state (the auto-replies)
            record_failure(warehouse.connect, failed, exc)
            return CabinetOutcome(cabinet_id, "retrying", f"{reason}; the next window tries again", stored)
        if is_transient(exc) and retry_feed is not None:
            try:
                with warehouse.connect() as conn, conn.transaction():
                    mark_deferred(conn, cabinet_id, retry_feed, datetime.now(UTC) + RETRY_AFTER, reason)
                return CabinetOutcome(cabinet_id, "retrying", reason, stored)
            except (psycopg.Error, InvalidInput):
                pass  # the warehouse is gone too: a failure, below
        record_failure(warehouse.connect, failed, exc)
        own = isinstance(exc, WbError | UnknownCabinet)
        return CabinetOutcome(cabinet_id, "failed", reason, stored, systemic=not own)
    paused = [r for r in runs if r.deferred_until is not None]
    if paused:
        return CabinetOutcome(
            cabinet_id,
            "deferred",
            f"until {paused[0].deferred_until}: {paused[0].deferred_reason}",
            runs,
            notes,
            resume_at=paused[0].deferred_until,
        )
    return CabinetOutcome(cabinet_id, "succeeded", None, runs, notes)


@dataclass(frozen=True)
class SweepJob:
    """Who a sweep's outcomes belong to (sweep_outcomes.job / queue)."""

    name: str
    queue: str


def under_lock(
    cabinet_id: str, run_id: str, locks: LockSession, work: Callable[[CabinetLock], CabinetOutcome]
) -> CabinetOutcome:
    """One unit of a sweep: try the cabinet's lock in the sweep's session (``skipped`` as busy if
    another holds it), do ``work`` under it, release."""
    with logs.bind(run_id=run_id, cabinet=cabinet_id):
        lock = locks.lock(cabinet_id)
        try:
            if not lock.try_acquire():
                return CabinetOutcome(cabinet_id, "skipped", BUSY)
        except psycopg.Error as exc:
            return CabinetOutcome(
                cabinet_id, "failed", f"could not take the cabinet lock: {describe(exc)}", systemic=True
            )
        with lock:
            return work(lock)


def sweep_cabinet(
    spec: SyncJobSpec, cabinet_id: str, run_id: str, locks: LockSession, warehouse: Warehouse, wb: WbApi
) -> CabinetOutcome:
    """One cabinet of a sync's sweep: under its lock, the sync's entry point (see ``_cabinet_work``)."""
    return under_lock(
        cabinet_id, run_id, locks, lambda lock: _cabinet_work(spec, cabinet_id, run_id, warehouse, wb, lock)
    )


def record_outcomes(warehouse: Warehouse, job: SweepJob, run_id: str, outcomes: list[CabinetOutcome]) -> None:
    """The outcomes' rows of ``sweep_outcomes``, in one statement (never raises over them: they are logged anyway)."""
    if not outcomes:
        return
    try:
        with warehouse.connect() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sweep_outcomes (run_id, job, queue, cabinet_id, outcome, reason, finished_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(run_id, job.name, job.queue, o.cabinet_id, o.outcome, o.reason, o.finished_at) for o in outcomes],
            )
    except (psycopg.Error, OptimaError) as exc:
        log.warning(f"could not record {len(outcomes)} sweep outcomes: {describe(exc)}")


def sweep(
    cabinets: list[str],
    work: Callable[[str], CabinetOutcome],
    *,
    threads: int,
    busy_wait: float,
    retry_every: float = 2.0,
    resume_within: float = RESUME_WITHIN,
) -> Iterator[CabinetOutcome]:
    """Run ``work`` for every cabinet, ``threads`` at once, yielding each outcome as it comes.

    A cabinet found busy goes back to the end of the line (tried again ``retry_every`` seconds
    later, other cabinets first) until ``busy_wait`` seconds after it was first found busy; then its
    busy outcome is final. A cabinet WB paused for at most ``resume_within`` seconds (the statistics
    API's one request a minute, say) is done again once the pause is over, in this sweep, at most
    ``MAX_RESUMES`` times: that outcome is yielded with ``final=False`` (what it stored is
    materialized; the cabinet's count waits for its last outcome) and no resume run is needed. The
    caller's thread does everything Dagster (events, logs)."""
    ready = list(dict.fromkeys(cabinets))
    ready.reverse()  # popped from the end: the given order
    later: list[tuple[float, str]] = []  # (not before, cabinet), a heap
    first_busy: dict[str, float] = {}
    resumes: Counter[str] = Counter()
    running: dict[Future[CabinetOutcome], str] = {}
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="sweep") as pool:
        while ready or later or running:
            now = time.monotonic()
            while later and later[0][0] <= now:
                ready.append(heapq.heappop(later)[1])
            while ready and len(running) < threads:
                cabinet = ready.pop()
                running[pool.submit(work, cabinet)] = cabinet
            timeout = None if not later else max(0.05, later[0][0] - time.monotonic())
            if not running:
                time.sleep(timeout or 0)
                continue
            done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                cabinet = running.pop(future)
                outcome = future.result()
                if outcome.busy:
                    now = time.monotonic()
                    since = first_busy.setdefault(cabinet, now)
                    if now - since < busy_wait:
                        heapq.heappush(later, (now + retry_every, cabinet))
                        continue
                if outcome.outcome == "deferred" and outcome.resume_at is not None and resumes[cabinet] < MAX_RESUMES:
                    wait_s = (outcome.resume_at - datetime.now(UTC)).total_seconds()
                    if wait_s <= resume_within:
                        resumes[cabinet] += 1
                        heapq.heappush(later, (time.monotonic() + max(0.0, wait_s) + 0.1, cabinet))
                        outcome.final = False
                yield outcome


def drive_sweep(
    context: OpExecutionContext,
    warehouse: Warehouse,
    job: SweepJob,
    items: list[str],
    work: Callable[[str, LockSession], CabinetOutcome],
    *,
    window: str = "",
    emit: Callable[[list[FeedLoad]], None] | None = None,
) -> None:
    """Run a sweep's ``items`` (cabinets, or an engine's (cabinet, slot) keys) through ``work`` with
    the scheduler of ``sweep``, their cabinets' locks in one session of the run, and report: a log line per item naming its cabinet and outcome,
    the materializations of what changed (``emit``, in batches), the run's outcome tag, and a
    failure of the run when an item failed for a reason that is not its cabinet's own."""
    settings = load_settings()
    counts: Counter[str] = Counter()
    systemic: list[CabinetOutcome] = []
    started = time.monotonic()
    # Materializations go out in batches (every EMIT_EVERY seconds, and at the end): Dagster stores
    # a batch in one statement (dagster_internals.log_materializations), not an event at a time.
    unemitted: list[FeedLoad] = []
    unrecorded: list[CabinetOutcome] = []
    last_emit = time.monotonic()
    locks = LockSession(warehouse.connect)
    try:
        for outcome in sweep(
            items,
            lambda item: work(item, locks),
            threads=settings.sweep_threads,
            busy_wait=settings.sweep_busy_wait_seconds,
        ):
            unemitted += outcome.runs
            if outcome.final:
                counts[outcome.outcome] += 1
                unrecorded.append(outcome)
            figures = {run.feed: run.summary() for run in outcome.runs} | outcome.notes
            line = f"{job.name.removesuffix('_sweep')} of {outcome.cabinet_id}: {outcome.outcome}"
            if not outcome.final:
                line += ", back when WB allows, in this run"
            if outcome.reason:
                line += f" ({outcome.reason})"
            if figures:
                line += f": {figures}"
            with logs.bind(cabinet=outcome.cabinet_id):  # the line's cabinet field, in either log format
                (context.log.error if outcome.systemic else context.log.info)(line)
            if outcome.systemic:
                systemic.append(outcome)
            if time.monotonic() - last_emit >= EMIT_EVERY:
                if emit is not None:
                    emit(unemitted)
                record_outcomes(warehouse, job, context.run_id, unrecorded)
                unemitted, unrecorded, last_emit = [], [], time.monotonic()
    finally:
        locks.close()
        if emit is not None:
            emit(unemitted)
        record_outcomes(warehouse, job, context.run_id, unrecorded)
    summary = " ".join(f"{o}={counts[o]}" for o in SWEEP_OUTCOMES)
    context.instance.add_run_tags(context.run_id, {TAG_SWEEP_OUTCOME: summary})
    context.log.info(
        f"{job.name} window {window or '-'}: {len(items)} in {time.monotonic() - started:.1f} s: {summary}"
    )
    if systemic:
        first = systemic[0]
        raise Failure(
            description=f"{len(systemic)} of {len(items)} failed for a reason that is not their cabinet's "
            f"(the others are done): {first.cabinet_id}: {first.reason}",
            allow_retries=False,
        )


def run_sweep(
    spec: SyncJobSpec, context: OpExecutionContext, config: SweepConfig, warehouse: Warehouse, wb: WbApi
) -> None:
    """The op of a sync's sweep job (see the module docstring)."""
    cabinets = list(dict.fromkeys(config.cabinet_ids))
    ensure_cabinet_partitions(context, cabinets)
    drive_sweep(
        context,
        warehouse,
        SweepJob(spec.sweep_name, spec.queue),
        cabinets,
        lambda cabinet_id, locks: sweep_cabinet(spec, cabinet_id, context.run_id, locks, warehouse, wb),
        window=config.window,
        emit=lambda runs: spec.emit(context, runs, "scheduled", None),
    )


def sweep_job(spec: SyncJobSpec) -> JobDefinition:
    """The sweep job of a scheduled ``spec``: one run over many cabinets (``SweepConfig``)."""
    if spec.user:
        raise ValueError(f"{spec.name} is a job people wait on: it has no sweep")
    description = f"{spec.description} Every due cabinet of a cadence window, in one run."

    @op(name=op_name(spec.sweep_name), description=description)
    def _op(context: OpExecutionContext, config: SweepConfig, warehouse: Warehouse, wb: WbApi) -> None:
        run_sweep(spec, context, config, warehouse, wb)

    @job(name=spec.sweep_name, tags=queue_tags(spec.queue), description=description)
    def _job() -> None:
        _op()

    return _job
