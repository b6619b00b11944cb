"""Review auto-replies: answer buyers' feedbacks and questions from the cabinet's rules, each exactly once.

**Rules** (``autoreply_rules``, written by the backend), tried by ``priority`` (lower first), the
first that matches wins:

- ``applies_to``: feedback, question or any;
- ``min_rating``/``max_rating``: the feedback's stars (a rule with a rating bound never matches a
  question);
- ``keywords``: any of them in the text, pros or cons (case-insensitive); none: any text;
- ``nm_ids``: only these products; none: any product;
- ``answer_template``: the answer, with ``{name}`` (the buyer's name, or «покупатель») and
  ``{product}``; NULL: no answer (leave it to a person);
- ``complaint`` (+ ``complaint_reason``): record a complaint about the feedback.

**Sync** (every 15 minutes per cabinet with rules): loads WB's unanswered feedbacks and questions
into ``autoreply_items``; items we know as open that WB no longer lists as unanswered were answered
elsewhere (the seller's portal, another tool) and are closed as ``answered_elsewhere``; each new
item (and each one no rule matched before: the rules may have changed) is matched, and its answer
is ``queued`` (a conditional update: an item is queued once). The sync run then sends the queued
answers itself: it holds the cabinet's gate and a WB client already, so there is no run per
answer. At the first transient WB failure, that answer and the rest become
``autoreply-answer-send`` requests, each retried with backoff in a run of its own.

**Send** (in the sync, or for a request): reads the item at WB first; answered already (by us in
an earlier attempt, or elsewhere) → nothing is sent. Otherwise the answer goes out under the intent
``answer:<kind>:<id>`` in ``engine_actions``, which is never sent again once recorded ok.

**Complaints**: WB's API as documented (wb-api.md §8) has no complaint method, so a complaint is a
recorded intent (``autoreply_complaints``, status ``recorded``, and an audit row) for a person to
file in the seller's portal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from optima_pipelines.db.statements import update_where
from optima_pipelines.engines.audit import begin_action, finish_action, record_action
from optima_pipelines.orchestration.queues import AUTOREPLY_ANSWER_SEND, AUTOREPLY_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput
from optima_pipelines.warehouse.requests import AUTOREPLY_ANSWER_SEND_KIND
from optima_pipelines.wb import Feedback, Question, WbClient, WbError

ENGINE = "autoreply"
SYNC_QUEUE = AUTOREPLY_SYNC
SEND_QUEUE = AUTOREPLY_ANSWER_SEND
SEND_KIND = AUTOREPLY_ANSWER_SEND_KIND  # the request kind an answer to retry becomes
ITEM_KINDS = ("feedback", "question")  # what an answer goes to
#: Answers one sync sends itself (two WB requests each, within WB's 3 a second): ~2 minutes.
MAX_SENDS_PER_SYNC = 200
#: Items that are still ours to answer (the sync reconciles them against WB's unanswered list).
OPEN_STATES = ("new", "no_rule", "queued", "failed")


@dataclass(frozen=True)
class Rule:
    id: int
    applies_to: str = "feedback"
    min_rating: int | None = None
    max_rating: int | None = None
    keywords: Sequence[str] = ()
    nm_ids: Sequence[int] = ()
    answer_template: str | None = None
    complaint: bool = False
    complaint_reason: str | None = None
    name: str = ""


@dataclass(frozen=True)
class Item:
    item_id: str
    kind: str
    nm_id: int | None
    rating: int | None
    text: str
    author: str | None = None
    product_name: str | None = None
    created_date: datetime | None = None


@dataclass(frozen=True)
class Reply:
    rule: Rule
    answer: str | None
    complaint: str | None


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def matches(rule: Rule, item: Item) -> bool:
    """Whether ``rule`` applies to ``item`` (pure)."""
    if rule.applies_to not in ("any", item.kind):
        return False
    if rule.min_rating is not None or rule.max_rating is not None:
        if item.kind != "feedback" or item.rating is None:
            return False
        if rule.min_rating is not None and item.rating < rule.min_rating:
            return False
        if rule.max_rating is not None and item.rating > rule.max_rating:
            return False
    if rule.nm_ids and item.nm_id not in rule.nm_ids:
        return False
    if rule.keywords:
        text = item.text.casefold()
        if not any(k.strip().casefold() in text for k in rule.keywords if k.strip()):
            return False
    return True


def render(template: str, item: Item) -> str:
    """The answer text: ``{name}`` and ``{product}`` filled in; any other brace text left as it is."""
    values = _Blank(name=(item.author or "").strip() or "покупатель", product=(item.product_name or "").strip())
    return template.format_map(values).strip()


def choose(rules: Iterable[Rule], item: Item) -> Reply | None:
    """The first matching rule's answer and complaint, or None when no rule matches (pure)."""
    for rule in rules:
        if matches(rule, item):
            answer = render(rule.answer_template, item) if rule.answer_template else None
            complaint = (rule.complaint_reason or rule.name or "rule") if rule.complaint else None
            return Reply(rule, answer, complaint)
    return None


def item_of(wb_item: Feedback | Question) -> Item:
    details = wb_item.product_details
    if isinstance(wb_item, Feedback):
        text = " ".join(t for t in (wb_item.text, wb_item.pros, wb_item.cons) if t)
        return Item(
            wb_item.id,
            "feedback",
            details.nm_id,
            wb_item.product_valuation,
            text,
            wb_item.user_name,
            details.product_name,
            wb_item.created_date,
        )
    return Item(
        wb_item.id, "question", details.nm_id, None, wb_item.text, None, details.product_name, wb_item.created_date
    )


# -- sync ---------------------------------------------------------------------------------------


def load_rules(conn: psycopg.Connection, cabinet_id: str) -> list[Rule]:
    rows = conn.execute(
        "SELECT id, applies_to, min_rating, max_rating, keywords, nm_ids, answer_template, complaint,"
        " complaint_reason, name FROM autoreply_rules WHERE cabinet_id = %s AND enabled ORDER BY priority, id",
        (cabinet_id,),
    ).fetchall()
    return [Rule(r[0], r[1], r[2], r[3], tuple(r[4] or ()), tuple(r[5] or ()), r[6], r[7], r[8], r[9]) for r in rows]


def cabinets_with_rules(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute("SELECT DISTINCT cabinet_id FROM autoreply_rules WHERE enabled").fetchall()
    return {r[0] for r in rows}


@dataclass
class SyncResult:
    seen: int = 0
    new: int = 0
    answered_elsewhere: int = 0
    queued: int = 0
    no_rule: int = 0
    complaints: int = 0

    def summary(self) -> dict[str, Any]:
        return dict(self.__dict__)


def fetch_unanswered(client: WbClient) -> list[Item]:
    """Every unanswered feedback and question at WB now (complete listings, or an error)."""
    items: list[Item] = []
    for page in client.iter_feedbacks(is_answered=False):
        items.extend(item_of(f) for f in page)
    for qpage in client.iter_questions(is_answered=False):
        items.extend(item_of(q) for q in qpage)
    return items


def sync(conn: psycopg.Connection, cabinet_id: str, unanswered: list[Item], run_id: str | None = None) -> SyncResult:
    """Store, reconcile, match and queue (see the module docstring); commits."""
    result = SyncResult(seen=len(unanswered))
    rules = load_rules(conn, cabinet_id)
    # One transaction: the new items and the reconciliation
    ids = [i.item_id for i in unanswered]
    known = {
        r[0]
        for r in conn.execute(
            "SELECT item_id FROM autoreply_items WHERE cabinet_id = %s AND item_id = ANY(%s)", (cabinet_id, ids)
        ).fetchall()
    }
    fresh = [i for i in unanswered if i.item_id not in known]
    result.new = len(fresh)
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO autoreply_items (cabinet_id, item_id, kind, nm_id, rating, text, author, product_name,"
            " created_date) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [
                (cabinet_id, i.item_id, i.kind, i.nm_id, i.rating, i.text, i.author, i.product_name, i.created_date)
                for i in fresh
            ],
        )
    # Open here, answered at WB: someone answered it elsewhere (or WB removed it).
    gone = conn.execute(
        "UPDATE autoreply_items SET state = 'answered_elsewhere', updated_at = now()"
        " WHERE cabinet_id = %s AND state = ANY(%s) AND item_id <> ALL(%s) RETURNING item_id",
        (cabinet_id, [s for s in OPEN_STATES if s != "failed"], [i.item_id for i in unanswered]),
    ).fetchall()
    result.answered_elsewhere = len(gone)
    conn.commit()
    todo = conn.execute(
        "SELECT item_id, kind, nm_id, rating, text, author, product_name, created_date FROM autoreply_items"
        " WHERE cabinet_id = %s AND state IN ('new', 'no_rule') ORDER BY created_date, item_id",
        (cabinet_id,),
    ).fetchall()
    for row in todo:
        item = Item(*row)
        reply = choose(rules, item)
        # One transaction per item: its state, its request and its complaint together
        if reply is None or reply.answer is None:
            conn.execute(
                "UPDATE autoreply_items SET state = 'no_rule', rule_id = %s, updated_at = now()"
                " WHERE cabinet_id = %s AND item_id = %s AND state IN ('new', 'no_rule')",
                (reply.rule.id if reply else None, cabinet_id, item.item_id),
            )
            result.no_rule += 1
        else:
            moved = conn.execute(
                "UPDATE autoreply_items SET state = 'queued', rule_id = %s, answer_text = %s, updated_at = now()"
                " WHERE cabinet_id = %s AND item_id = %s AND state IN ('new', 'no_rule') RETURNING item_id",
                (reply.rule.id, reply.answer, cabinet_id, item.item_id),
            ).fetchone()
            if moved is not None:
                result.queued += 1
        if reply is not None and reply.complaint is not None:
            if _record_complaint(conn, cabinet_id, item, reply, run_id):
                result.complaints += 1
        conn.commit()
    return result


def _queue_answer(conn: psycopg.Connection, cabinet_id: str, item: Item) -> int:
    row = conn.execute(
        "INSERT INTO requests (kind, cabinet_id, payload) VALUES (%s, %s, %s) RETURNING id",
        (SEND_KIND, cabinet_id, Jsonb({"item_id": item.item_id, "kind": item.kind})),
    ).fetchone()
    assert row is not None
    conn.execute(
        "UPDATE autoreply_items SET request_id = %s WHERE cabinet_id = %s AND item_id = %s",
        (row[0], cabinet_id, item.item_id),
    )
    return int(row[0])


def sync_cabinet(inp: SyncInput) -> list[FeedLoad]:
    """The autoreply sync of one cabinet as the sync pipeline runs it (a ``sync.runs.Sync``): load
    WB's unanswered items, reconcile and match them (``sync``), send what the rules answered
    (``send_queued``). It writes no feed: what it did goes to ``inp.notes`` (the run's log)."""
    client = inp.client()
    with inp.connect() as conn:
        result = sync(conn, inp.cabinet_id, fetch_unanswered(client), inp.run_id)
        sent = send_queued(conn, client, inp.cabinet_id, inp.run_id)
    inp.notes.update(replies=result.summary(), answers=sent)
    return []


def send_queued(
    conn: psycopg.Connection, client: WbClient, cabinet_id: str, run_id: str | None, limit: int = MAX_SENDS_PER_SYNC
) -> dict[str, int]:
    """Send the answers the sync queued, in the sync's own run (it holds the cabinet's gate and a
    client already: no run per answer), oldest first, at most ``limit`` (the rest wait for the next
    sync: a first sync of a cabinet with a long backlog does not hold the gate for long). The first
    transient WB failure stops here: that item and every one after it become
    ``autoreply-answer-send`` requests, which retry with backoff."""
    counts = {"answered": 0, "skipped": 0, "failed": 0, "requests": 0}
    rows = conn.execute(
        "SELECT item_id, kind FROM autoreply_items WHERE cabinet_id = %s AND state = 'queued' AND request_id IS NULL"
        " ORDER BY created_date, item_id LIMIT %s",
        (cabinet_id, limit),
    ).fetchall()
    for n, (item_id, kind) in enumerate(rows):
        try:
            outcome = send_answer(conn, client, cabinet_id, SendTarget(item_id, kind, None), run_id)
        except AnswerFailed:
            counts["failed"] += 1
            continue
        except WbError as exc:
            if not exc.is_transient:
                raise
            conn.rollback()
            for rest_id, rest_kind in rows[n:]:
                _queue_answer(conn, cabinet_id, Item(rest_id, rest_kind, None, None, ""))
                counts["requests"] += 1
            conn.commit()
            break
        counts["answered" if outcome == "answered" else "skipped"] += 1
    return counts


def _record_complaint(conn: psycopg.Connection, cabinet_id: str, item: Item, reply: Reply, run_id: str | None) -> bool:
    added = conn.execute(
        "INSERT INTO autoreply_complaints (cabinet_id, item_id, rule_id, reason) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT DO NOTHING RETURNING item_id",
        (cabinet_id, item.item_id, reply.rule.id, reply.complaint),
    ).fetchone()
    if added is None:
        return False
    record_action(
        conn,
        cabinet_id=cabinet_id,
        engine=ENGINE,
        action="queue_complaint",
        target=f"{item.kind}:{item.item_id}",
        reason=f"rule {reply.rule.name or reply.rule.id}: {reply.complaint}",
        status="ok",
        request={"item_id": item.item_id, "rating": item.rating, "reason": reply.complaint},
        response={"sent": False, "note": "WB's API has no complaint method: recorded for a person to file"},
        intent_id=f"complaint:{item.kind}:{item.item_id}",
        run_id=run_id,
    )
    return True


# -- send ---------------------------------------------------------------------------------------


class AnswerFailed(Exception):
    """A permanent failure of one answer (the item is marked failed with ``reason``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SendTarget:
    item_id: str
    kind: str
    text: str | None  # None: the answer the sync generated


def check_send_payload(payload: Any) -> SendTarget:
    from optima_pipelines.errors import InvalidInput

    if not isinstance(payload, dict):
        raise InvalidInput('malformed payload: expected {"item_id": "...", "kind": "feedback" | "question"}')
    item_id, kind, text = payload.get("item_id"), payload.get("kind", "feedback"), payload.get("text")
    if not isinstance(item_id, str) or not item_id.strip():
        raise InvalidInput("the payload names no item_id")
    if kind not in ITEM_KINDS:
        raise InvalidInput(f"kind must be feedback or question, got {kind!r}")
    if text is not None and not isinstance(text, str):
        raise InvalidInput("text must be a string")
    return SendTarget(item_id.strip(), kind, text)


def _set_item(conn: psycopg.Connection, cabinet_id: str, item_id: str, state: str, **values: Any) -> None:
    update_where(conn, "autoreply_items", {"cabinet_id": cabinet_id, "item_id": item_id}, {"state": state, **values})


def send_answer(
    conn: psycopg.Connection, client: WbClient, cabinet_id: str, target: SendTarget, run_id: str | None
) -> str:
    """Send one answer, idempotently; returns what happened (answered | already answered | answered
    elsewhere). Raises AnswerFailed for a permanent failure, a transient WbError to be retried."""
    row = conn.execute(
        "SELECT state, answer_text FROM autoreply_items WHERE cabinet_id = %s AND item_id = %s",
        (cabinet_id, target.item_id),
    ).fetchone()
    if row is None:  # an answer the backend asks for on an item no sync has seen yet
        conn.execute(
            "INSERT INTO autoreply_items (cabinet_id, item_id, kind, state) VALUES (%s, %s, %s, 'queued')",
            (cabinet_id, target.item_id, target.kind),
        )
        state, generated = "queued", None
    else:
        state, generated = row
    if state in ("answered", "answered_elsewhere"):
        conn.commit()
        return f"nothing sent: {state.replace('_', ' ')}"
    text = (target.text or generated or "").strip()
    if not text:
        _set_item(conn, cabinet_id, target.item_id, "failed", error="no answer text: no rule gave one")
        conn.commit()
        raise AnswerFailed("no answer text: no rule gave one and the request has none")
    # Check WB first: an answer already there (ours from an earlier attempt, or someone else's).
    at_wb = client.feedback(target.item_id) if target.kind == "feedback" else client.question(target.item_id)
    if at_wb is None:
        _set_item(conn, cabinet_id, target.item_id, "failed", error="WB does not know this item (deleted?)")
        conn.commit()
        raise AnswerFailed(f"WB has no {target.kind} {target.item_id}")
    intent_id = f"answer:{target.kind}:{target.item_id}"
    if at_wb.answer is not None:
        ours = at_wb.answer.text.strip() == text
        if ours:  # an earlier attempt landed although its answer was lost: the audit says so
            row = conn.execute(
                "SELECT id FROM engine_actions WHERE cabinet_id = %s AND engine = %s AND intent_id = %s"
                " AND status <> 'ok'",
                (cabinet_id, ENGINE, intent_id),
            ).fetchone()
            if row is not None:
                finish_action(conn, row[0], "ok", {"answered": True, "confirmed_at_wb": True})
        _set_item(
            conn,
            cabinet_id,
            target.item_id,
            "answered" if ours else "answered_elsewhere",
            answer_text=text if ours else generated,
            answered_at=datetime.now().astimezone(),
        )
        conn.commit()
        return "nothing sent: already answered" if ours else "nothing sent: answered elsewhere"
    action_id = begin_action(
        conn,
        cabinet_id=cabinet_id,
        engine=ENGINE,
        action=f"answer_{target.kind}",
        target=f"{target.kind}:{target.item_id}",
        reason="answer from the cabinet's reply rules" if target.text is None else "answer given by the seller",
        request={"id": target.item_id, "text": text},
        intent_id=intent_id,
        run_id=run_id,
    )
    if action_id is None:  # recorded ok before, yet WB shows no answer: never send twice
        _set_item(conn, cabinet_id, target.item_id, "answered", answer_text=text)
        conn.commit()
        return "nothing sent: already answered"
    _set_item(conn, cabinet_id, target.item_id, "sending", answer_text=text, error=None)
    conn.commit()
    try:
        if target.kind == "feedback":
            client.answer_feedback(target.item_id, text)
        else:
            client.answer_question(target.item_id, text)
    except WbError as exc:
        finish_action(conn, action_id, "failed", {"error": str(exc), "will_retry": exc.is_transient})
        if exc.is_transient:
            _set_item(conn, cabinet_id, target.item_id, "queued", error=str(exc)[:2000])
            conn.commit()
            raise
        reason = getattr(exc, "detail", None) or str(exc)
        _set_item(conn, cabinet_id, target.item_id, "failed", error=reason[:2000])
        conn.commit()
        raise AnswerFailed(reason) from None
    finish_action(conn, action_id, "ok", {"answered": True})
    _set_item(conn, cabinet_id, target.item_id, "answered", answered_at=datetime.now().astimezone(), error=None)
    conn.commit()
    return "answered"


def fail_item(conn: psycopg.Connection, cabinet_id: str, item_id: str, reason: str) -> None:
    """The last attempt failed on a transient error: the item ends failed with the reason."""
    _set_item(conn, cabinet_id, item_id, "failed", error=reason[:2000])
    conn.commit()
