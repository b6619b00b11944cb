"""Replay: the syncs run again over what WB said, from the landing, without one request to WB.

Each landed answer names the invocation of the sync entry point that received it
(``sync.runs.run_sync``: the entry point, e.g. ``optima_pipelines.sync.ads.sync``, and the SyncInput
it had). ``replay`` takes a cabinet's invocations of a feed and a span of Moscow days in the order
WB answered them and runs each one's entry point again: the SAME ``Sync`` with a WbClient whose
transport (``ReplayTransport``) answers every read with the invocation's next landed answer to that
endpoint instead of sending it. Decoding and merging are the live code; so are the cursors and the
figures. The syncs' clock is set to the moment the live invocation began (``timeutil.clock_at``):
"today" is the day WB answered.

Where the landed answers of an invocation run out (its live run stopped there: done, paused by WB,
failed; or the endpoint's feed is not being replayed), the transport raises ``ReplayEnd``, a
``WbDeferred``: the sync stops there as the live one did, keeping what it merged. Deferrals the replay
leaves in sync_state are put back as they were, so no resume run asks WB for them. The engines' work
(bids, prices, answers) is never replayed: its reads are landed, but an entry point outside
``optima_pipelines.sync`` is skipped, and a replayed client sends no write.
"""

from __future__ import annotations

import importlib
import json
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import httpx
import psycopg

from optima_pipelines.db.connection import Connect
from optima_pipelines.landing.store import Landing, LandingError
from optima_pipelines.logs import get_logger
from optima_pipelines.sync.runs import ANY_CABINET, TRIGGERS, FeedLoad, Sync, SyncInput, stored_runs
from optima_pipelines.timeutil import clock_at, now_moscow
from optima_pipelines.wb import RateLimiter, WbClient, WbConfig, WbDeferred, WbRequestError
from optima_pipelines.wb.http import Endpoint, Transport

log = get_logger(__name__)

#: Only the syncs' entry points are replayed (they write the warehouse from WB's answers); the
#: engines' (bids, prices, answers) act on WB and are not.
REPLAYABLE = "optima_pipelines.sync."


class ReplayEnd(WbDeferred):
    """The landing holds no more answers of this invocation to this endpoint: the live run stopped
    here (done, paused, failed), or the endpoint's feed is not replayed."""


class ReplayTransport(Transport):
    """A WbClient's transport that answers from the landed answers of one invocation: each request
    gets the next answer landed for its endpoint, in the order WB sent them. Nothing is sent."""

    def __init__(self, cabinet_id: str, answers: Iterable[dict[str, Any]], config: WbConfig):
        # No HTTP client, no token, no limiter slot: only what decoding needs (Transport.decode).
        self.cabinet_id = cabinet_id
        self.config = config
        self.limiter = RateLimiter()
        self.token_type = "personal"
        self.landing = None
        self.answered_at = None
        #: Rows from the future are judged against the replay's clock (the moment WB answered live).
        self._now = now_moscow
        self._queues: dict[tuple[str, str, str], deque[dict[str, Any]]] = {}
        for answer in answers:
            key = (answer["method"], answer["category"], answer["path"])
            self._queues.setdefault(key, deque()).append(answer)
        self.served = 0

    def close(self) -> None:
        return None

    def call(
        self,
        endpoint: Endpoint,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        idempotent: bool | None = None,
        verify: Callable[[], bool] | None = None,
    ) -> httpx.Response | None:
        if endpoint.write:
            raise WbRequestError(
                cabinet_id=self.cabinet_id, endpoint=str(endpoint), status=None, detail="a replay sends nothing to WB"
            )
        queue = self._queues.get((endpoint.method, endpoint.category, endpoint.path))
        if not queue:
            raise ReplayEnd(
                self.cabinet_id,
                endpoint.group,
                datetime.now(UTC),
                "the landing holds no more answers of this run",
                endpoint=str(endpoint),
            )
        answer = queue.popleft()
        self.served += 1
        self.answered_at = answer["received_at"]
        return httpx.Response(answer["status"], content=answer["answer"])

    @property
    def unserved(self) -> int:
        return sum(len(q) for q in self._queues.values())


@dataclass
class Invocation:
    """One live call of a sync entry point, as the landing kept it."""

    id: str
    sync: str | None
    run_id: str | None
    cabinet_id: str
    inputs: dict[str, Any]
    started_at: datetime
    answers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReplayReport:
    """What a replay did: invocations run again, skipped (not a sync's) or failed (as the live ones may
    have), WB answers served from the landing, and the FeedLoads of what the merges changed."""

    cabinet_id: str
    invocations: int = 0
    replayed: int = 0
    answers: int = 0
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    runs: list[FeedLoad] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "cabinet": self.cabinet_id,
            "invocations": self.invocations,
            "replayed": self.replayed,
            "answers_served": self.answers,
            "rows_inserted": sum(r.merge.inserted for r in self.runs),
            "rows_updated": sum(r.merge.updated for r in self.runs),
            "rows_deleted": sum(r.rows_deleted for r in self.runs),
            "skipped": len(self.skipped),
            "failed": len(self.failed),
        }


def invocations(rows: Iterable[dict[str, Any]]) -> list[Invocation]:
    """Landed answers (in arrival order) grouped by invocation, in the order the invocations began."""
    out: dict[str, Invocation] = {}
    for row in rows:
        key = row["invocation"] or f"unnamed-{row['run_id']}-{row['seq']}"
        inv = out.get(key)
        if inv is None:
            inputs = json.loads(row["sync_input"]) if row["sync_input"] else {}
            started = datetime.fromisoformat(inputs["started_at"]) if inputs.get("started_at") else row["received_at"]
            inv = out[key] = Invocation(key, row["sync"], row["run_id"], row["cabinet_id"], inputs, started)
        inv.answers.append(row)
    return sorted(out.values(), key=lambda i: (i.started_at, i.answers[0]["seq"]))


def resolve_sync(name: str | None) -> Sync:
    """The entry point a landed answer names; ValueError when it is not a replayable sync."""
    if not name or not name.startswith(REPLAYABLE):
        raise ValueError(f"{name or 'no sync'} is not a sync entry point (only {REPLAYABLE}* are replayed)")
    module_name, _, attr = name.rpartition(".")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        raise ValueError(f"{name} no longer exists in this version of optima_pipelines") from None
    if not callable(target):
        raise ValueError(f"{name} is not a function")
    return target  # type: ignore[no-any-return]


def _pauses(conn: psycopg.Connection, cabinet_id: str) -> dict[str, tuple[Any, Any]]:
    rows = conn.execute(
        "SELECT feed, resume_at, last_error FROM sync_state WHERE cabinet_id = %s", (cabinet_id,)
    ).fetchall()
    return {feed: (resume_at, error) for feed, resume_at, error in rows}


def replay(
    landing: Landing,
    connect: Connect,
    cabinet_id: str,
    *,
    feeds: Iterable[str] | None = None,
    first: date | None = None,
    last: date | None = None,
    run_id: str | None = None,
) -> ReplayReport:
    """Run again every invocation that landed answers of ``feeds`` (None: every feed) for
    ``cabinet_id`` on Moscow days ``first``..``last``, in the order WB answered them, serving each
    only its landed answers of those feeds. Raises LandingError (naming the file) before anything is
    merged when a landed file is corrupt or of another schema version."""
    wanted = set(feeds) if feeds is not None else None
    landing.recover()  # spools of processes that died: theirs are answers too
    table = landing.read(cabinet_id, first, last, wanted)
    report = ReplayReport(cabinet_id)
    run_id = run_id or f"replay-{uuid.uuid4().hex[:12]}"
    config = WbConfig.for_base_url("http://replay.invalid")
    with connect() as conn:
        before = _pauses(conn, cabinet_id)
    for inv in invocations(table.to_pylist()):
        report.invocations += 1
        where = (
            f"{inv.sync or 'unnamed work'} of run {inv.run_id} (began {inv.started_at.isoformat(timespec='seconds')})"
        )
        try:
            body = resolve_sync(inv.sync)
        except ValueError as exc:
            report.skipped.append(f"{where}: {exc}")
            log.info(f"replay of {cabinet_id}: skipped {where}: {exc}")
            continue
        transport = ReplayTransport(inv.cabinet_id, inv.answers, config)

        def client(cabinet: str = inv.cabinet_id, transport: ReplayTransport = transport) -> WbClient:
            return WbClient(cabinet, "", config=config, transport=transport)

        inputs = inv.inputs
        anywhere = inputs.get("cabinet_id") == ANY_CABINET
        inp = SyncInput(
            connect=connect,
            cabinet_id=ANY_CABINET if anywhere else cabinet_id,
            run_id=run_id,
            trigger=str(inputs["trigger"]) if inputs.get("trigger") in TRIGGERS else "manual",
            client=client,
            client_for=(lambda _cabinet: client()) if anywhere else None,
            window_days=inputs.get("window_days"),
            date_from=date.fromisoformat(inputs["date_from"]) if inputs.get("date_from") else None,
            day=date.fromisoformat(inputs["day"]) if inputs.get("day") else None,
            backfill_id=inputs.get("backfill_id"),
            options=inputs.get("options") or {},
        )
        try:
            with clock_at(inv.started_at):
                runs = body(inp)
        except LandingError:
            raise
        except Exception as exc:  # the live run may have failed here too: the others go on
            report.runs += stored_runs(exc)
            report.failed.append(f"{where}: {exc.__class__.__name__}: {exc}")
            log.warning(f"replay of {cabinet_id}: {where} failed: {exc}")
        else:
            report.runs += runs
            report.replayed += 1
        report.answers += transport.served
    # Deferrals the replay's ReplayEnds recorded are not WB's: put sync_state's pauses back.
    with connect() as conn, conn.transaction():
        after = _pauses(conn, cabinet_id)
        for feed, (resume_at, error) in after.items():
            if before.get(feed, (None, None)) != (resume_at, error):
                old_resume, old_error = before.get(feed, (None, None))
                conn.execute(
                    "UPDATE sync_state SET resume_at = %s, last_error = %s WHERE cabinet_id = %s AND feed = %s",
                    (old_resume, old_error, cabinet_id, feed),
                )
    log.info(f"replay of {cabinet_id}: {report.summary()}")
    return report
