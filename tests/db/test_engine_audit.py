"""The engines' audit trail: an intent recorded ok is never sent again; a failed one may be retried."""

from __future__ import annotations

import psycopg
import pytest

from optima_pipelines.engines.audit import actions, begin_action, finish_action, record_action


@pytest.fixture
def conn(warehouse_conn: psycopg.Connection) -> psycopg.Connection:
    warehouse_conn.execute("INSERT INTO cabinets (id, name, status) VALUES ('c1', 'Shop', 'active')")
    return warehouse_conn


def _begin(conn: psycopg.Connection, intent: str | None) -> int | None:
    return begin_action(
        conn,
        cabinet_id="c1",
        engine="autobidder",
        action="set_bid",
        target="campaign 7, nm 42",
        reason="CPO 310 ₽ above the target 250 ₽",
        request={"bid_kopecks": 450},
        intent_id=intent,
        run_id="r1",
    )


def test_an_intent_recorded_ok_is_not_sent_again_and_a_failed_one_is_retried_on_the_same_row(conn):
    first = _begin(conn, "bid:7:42:1")
    assert first is not None
    finish_action(conn, first, "failed", {"error": "WB answered 500"})

    retry = _begin(conn, "bid:7:42:1")
    assert retry == first  # the same row: one action, not two
    finish_action(conn, retry, "ok", {"status": 204})

    assert _begin(conn, "bid:7:42:1") is None
    [row] = actions(conn, "c1")
    assert (row.status, row.response, row.request) == ("ok", {"status": 204}, {"bid_kopecks": 450})


def test_actions_without_intent_are_all_kept_newest_first_per_engine(conn):
    for n in range(3):
        record_action(
            conn,
            cabinet_id="c1",
            engine="booking",
            action="match_slot",
            target=f"task {n}",
            reason="coefficient 0 ≤ 1",
            status="ok",
        )
    _begin(conn, None)
    assert [a.target for a in actions(conn, "c1", "booking")] == ["task 2", "task 1", "task 0"]
    assert len(actions(conn, "c1")) == 4
    with pytest.raises(ValueError, match="unknown engine"):
        record_action(conn, cabinet_id="c1", engine="x", action="a", target="t", reason="r", status="ok")
