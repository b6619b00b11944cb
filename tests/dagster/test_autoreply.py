"""Review auto-replies against the simulator: every feedback and question answered by the rules exactly once."""

from __future__ import annotations

from collections import Counter

import pytest
from dagster import SkipReason

from optima_pipelines.sensors.autoreply import autoreply_sync_sensor
from optima_pipelines.sensors.requests import requests_sensor
from optima_pipelines.warehouse import requests as outbox
from tests.engines import evaluate, execute, fast_retries, writes
from tests.sim_fixtures import Wb
from tests.wb_syncs import served, simulator
from wb_simulator import CabinetSpec


@pytest.fixture
def wb(optima_env, settings, warehouse_conn, dagster_instance, monkeypatch):
    fast_retries(monkeypatch)
    spec = CabinetSpec(
        id="c1", products=3, orders_per_day=3, history_days=4, campaigns=0, feedback_rate=0.1, questions_per_day=0.3
    )
    sim = simulator(spec)
    with served(sim, monkeypatch, warehouse_conn, settings, dagster_instance) as base_url:
        yield sim, Wb(base_url, sim.token("c1"))


RULES = [
    # (priority, applies_to, min_rating, max_rating, answer, complaint)
    (10, "feedback", None, 2, "{name}, нам очень жаль. Мы свяжемся с вами.", True),
    (20, "feedback", 3, None, "Спасибо за отзыв о «{product}», {name}!", False),
    (30, "question", None, None, "Здравствуйте! Ответ на ваш вопрос есть в карточке «{product}».", False),
]


def answers_at_wb(sim) -> Counter:  # type: ignore[no-untyped-def]
    """How many answers WB received per item (feedback answers and question answers)."""
    ids = [w.payload["id"] for w in writes(sim, "feedback_answer")]
    ids += [w.payload["id"] for w in writes(sim, "question") if "answer" in w.payload]
    return Counter(ids)


def run_sync(instance):  # type: ignore[no-untyped-def]
    result, _ = evaluate(autoreply_sync_sensor, instance)
    (run_request,) = result.run_requests
    # A sweep over the cabinets with rules: here c1 alone.
    assert run_request.job_name == "autoreply_sync_sweep" and "optima/cabinet" not in run_request.tags
    assert run_request.run_config["ops"]["autoreply_sync_sweep_op"]["config"]["cabinet_ids"] == ["c1"]
    assert run_request.tags["optima/queue"] == "autoreply-sync"
    assert execute(run_request, instance).success


def test_every_item_gets_exactly_one_answer_from_the_rules_and_a_failing_one_ends_failed(
    wb, warehouse_conn, dagster_instance
):
    sim, http = wb
    for priority, applies_to, low, high, answer, complaint in RULES:
        warehouse_conn.execute(
            "INSERT INTO autoreply_rules (cabinet_id, priority, applies_to, min_rating, max_rating, answer_template,"
            " complaint, complaint_reason) VALUES ('c1', %s, %s, %s, %s, %s, %s, %s)",
            (priority, applies_to, low, high, answer, complaint, "оскорбительный отзыв" if complaint else None),
        )
    nm = sim.truth.prices("c1")[0]["nmID"]
    angry = sim.add_feedback("c1", nm, "Ужасно, развалилось", valuation=1)
    for stars in (5, 4, 3):
        sim.add_feedback("c1", nm, "Нормально", valuation=stars)
    sim.add_question("c1", nm, "Есть ли размер XL?")
    open_fb = [f for f in sim.truth.feedbacks("c1") if f["answer"] is None]
    open_q = [q for q in sim.truth.questions("c1") if q["answer"] is None]
    assert len(open_fb) >= 4 and len(open_q) >= 1, (len(open_fb), len(open_q))
    wb_answers_before = answers_at_wb(sim)

    # WB fails every answer for a while: the sync stops sending at the first failure, and that answer
    # and the rest become autoreply-answer-send requests (5 attempts each, with backoff).
    sim.faults.set("POST feedbacks/api/v1/feedbacks/answer", error_rate=1.0, times=6)
    sim.faults.set("PATCH feedbacks/api/v1/questions", error_rate=1.0, times=6)
    run_sync(dagster_instance)
    sim.faults.clear()
    queued = warehouse_conn.execute(
        "SELECT item_id, answer_text, request_id FROM autoreply_items WHERE state = 'queued'"
    ).fetchall()
    assert len(queued) == len(open_fb) + len(open_q) and all(r is not None for _, _, r in queued)
    # Someone answers one of them in the seller's portal before our answer goes out.
    elsewhere = next(item for item, _, _ in queued if item != angry and item in {f["id"] for f in open_fb})
    assert (
        http.post("feedbacks", "/api/v1/feedbacks/answer", {"id": elsewhere, "text": "Ответ из портала"}).status_code
        == 204
    )

    # Half of the answers reach WB and lose their reply: the client checks WB before sending again.
    sim.faults.set("feedbacks/api/v1/*/answer", lost_reply=0.5)
    sim.faults.set("PATCH feedbacks/api/v1/questions", lost_reply=0.5)
    run_requests = evaluate(requests_sensor, dagster_instance)[0].run_requests
    assert len(run_requests) == len(queued)
    assert {r.job_name for r in run_requests} == {"autoreply_answer_send"}
    for run_request in run_requests:
        assert execute(run_request, dagster_instance).success
    # New feedbacks and a question: the next sync answers them in its own run, no request, no run each.
    later = [sim.add_feedback("c1", nm, "Отлично", valuation=5), sim.add_question("c1", nm, "Есть ли M?")]
    run_sync(dagster_instance)
    assert isinstance(evaluate(requests_sensor, dagster_instance)[0], SkipReason)
    # Everything again (a retry, a double launch): nothing is sent twice.
    for run_request in run_requests[:3]:
        assert execute(run_request, dagster_instance).success
    run_sync(dagster_instance)

    counted = answers_at_wb(sim) - wb_answers_before
    ours = ({item for item, _, _ in queued} | set(later)) - {elsewhere}
    assert {item: counted[item] for item in ours} == dict.fromkeys(ours, 1), "each item answered exactly once"
    assert counted[elsewhere] == 1  # the portal's answer only
    texts = {f["id"]: f["answer"]["text"] for f in sim.truth.feedbacks("c1") if f["answer"]}
    assert texts[angry].endswith("нам очень жаль. Мы свяжемся с вами.")
    assert texts[elsewhere] == "Ответ из портала"
    assert all(q["answer"] is not None for q in sim.truth.questions("c1"))
    states = dict(warehouse_conn.execute("SELECT state, count(*) FROM autoreply_items GROUP BY 1").fetchall())
    assert states == {"answered": len(ours), "answered_elsewhere": 1}
    requests = {outbox.get_request(warehouse_conn, r).status for _, _, r in queued}
    assert requests == {"succeeded"}

    # The audit: one ok answer action per item we answered, and the complaint the rule asked for.
    actions = warehouse_conn.execute(
        "SELECT action, status, count(*) FROM engine_actions WHERE engine = 'autoreply' GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    fb_ours = len([i for i in ours if i in {f["id"] for f in open_fb} | {later[0]}])
    assert actions == [
        ("answer_feedback", "ok", fb_ours),
        ("answer_question", "ok", len(ours) - fb_ours),
        ("queue_complaint", "ok", len([f for f in open_fb if f["productValuation"] <= 2])),
    ]
    complaint = warehouse_conn.execute(
        "SELECT reason, status FROM autoreply_complaints WHERE item_id = %s", (angry,)
    ).fetchone()
    assert complaint == ("оскорбительный отзыв", "recorded")

    # An answer WB can never take (too long) ends failed with the reason, without an attempt at WB.
    question = sim.add_question("c1", nm, "?")
    request_id = outbox.create_request(
        warehouse_conn, "autoreply-answer-send", "c1", {"item_id": question, "kind": "question", "text": "x" * 6000}
    )
    (run_request,) = evaluate(requests_sensor, dagster_instance)[0].run_requests
    result = execute(run_request, dagster_instance)
    assert not result.success
    request = outbox.get_request(warehouse_conn, request_id)
    assert request.status == "failed" and "2..5000 characters" in (request.error or "")
    state, error = warehouse_conn.execute(
        "SELECT state, error FROM autoreply_items WHERE item_id = %s", (question,)
    ).fetchone()
    assert state == "failed" and "2..5000 characters" in error
    assert answers_at_wb(sim)[question] == 0
    assert warehouse_conn.execute(
        "SELECT status FROM engine_actions WHERE target = %s", (f"question:{question}",)
    ).fetchall() == [("failed",)]
