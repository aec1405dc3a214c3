"""The review queue: what joins it, claim order and filters, leases, fencing, the append-only trail,
re-extraction, and reviewers racing on real connections."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from schema import queue, review
from schema.review import ReviewStatus, StaleReview
from schema.stats_types import TaskFilter
from tests.factories import make_agent
from tests.review_fixtures import complete_with, invoice_pdf, invoice_result, make_reviewable

NO_SAMPLE = {"review_threshold": 0.6, "review_sample": 0.0}


def _now(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def test_only_documents_that_need_a_person_join_the_queue(conn):
    make_agent(conn, settings=NO_SAMPLE)
    confident = make_reviewable(conn, 1, confidence=0.95, low=())
    low = make_reviewable(conn, 2, confidence=0.95, low=("total",))
    finding = make_reviewable(conn, 3, confidence=0.95, low=(),
                              findings=[{"kind": "xml_page_mismatch", "field": "total", "xml": 1.0, "page": 2.0}])
    # A field that is not core (tax) below the threshold does not send the document to a person.
    not_core = make_reviewable(conn, 4, confidence=0.95, low=("tax",))
    reasons = {e.task_id: e.reason for e in review.queue(conn)}
    assert reasons == {low: "low_confidence", finding: "finding"}
    assert review.review_of_task(conn, confident) is None and review.review_of_task(conn, not_core) is None


def test_the_sampled_share_is_per_agent(conn):
    make_agent(conn, "all", settings={"review_sample": 1.0})
    make_agent(conn, "none", settings={"review_sample": 0.0})
    sampled = [make_reviewable(conn, n, agent="all", low=()) for n in range(1, 4)]
    for n in range(4, 7):
        make_reviewable(conn, n, agent="none", low=())
    assert sorted(e.task_id for e in review.queue(conn)) == sampled
    assert {e.reason for e in review.queue(conn)} == {"sample"}


def test_a_setting_of_the_wrong_type_falls_back_to_the_default(conn):
    make_agent(conn, settings={"review_threshold": "high", "review_sample": "none"})
    low = make_reviewable(conn, 1, confidence=0.95, low=("total",))
    assert [e.task_id for e in review.queue(conn)] == [low]
    # The hash that picks spot checks holds for the extreme ids too.
    assert conn.execute("SELECT quire_review_reason(id, '{}'::jsonb, 0.9, '{\"review_sample\": 1}'::jsonb, false) AS r "
                        "FROM (VALUES (-9223372036854775808), (1), (9223372036854775807)) v(id)").fetchall() == [
        {"r": "sample"}] * 3


def test_the_confidence_is_the_lowest_core_field_of_each_document_type(conn):
    # quire_review_confidence spells out the core fields of quire_review_core_fields (so that it
    # is inlined): for each type, every core field alone decides it, and nothing else does.
    types = ["invoice", "contract", "financial_statement", "other"]
    for document_type in types:
        core = conn.execute("SELECT quire_review_core_fields(%s) AS f", [document_type]).fetchone()["f"]
        fields = {f: {"confidence": 0.9} for f in (*core, "tax", "notes")}
        for field in (*core, "tax"):
            result = {"document_type": document_type, "fields": {**fields, field: {"confidence": 0.1}}}
            got = conn.execute("SELECT quire_review_confidence(%s::jsonb, 0.7) AS c",
                               [psycopg.types.json.Jsonb(result)]).fetchone()["c"]
            expected = 0.1 if field in core else (0.9 if core else 0.7)
            assert got == pytest.approx(expected), (document_type, field)
    # No numeric confidence on any core field: the task's own, else 0.
    rows = conn.execute("SELECT quire_review_confidence('{\"document_type\": \"invoice\", \"fields\": "
                        "{\"total\": {\"confidence\": \"high\"}}}'::jsonb, c) AS c "
                        "FROM (VALUES (0.4::real), (NULL)) v(c)").fetchall()
    assert [r["c"] for r in rows] == [pytest.approx(0.4), 0]


def test_next_is_lowest_confidence_then_oldest_within_the_filters(conn):
    make_agent(conn, settings=NO_SAMPLE)
    make_agent(conn, "other", settings=NO_SAMPLE)
    a = make_reviewable(conn, 1, confidence=0.5, low=(), customer="acme")
    b = make_reviewable(conn, 2, confidence=0.2, low=(), customer="acme")
    c = make_reviewable(conn, 3, confidence=0.5, low=(), customer="zenith")
    d = make_reviewable(conn, 4, confidence=0.1, low=(), agent="other", customer="acme")
    order = [review.read(conn, review.claim_next(conn, f"r{i}").review_id).task_id for i in range(4)]
    assert order == [d, b, a, c]
    assert review.claim_next(conn, "r9") is None

    # Filters: a fresh queue on fresh reviews.
    e = make_reviewable(conn, 5, confidence=0.4, low=(), customer="acme")
    f = make_reviewable(conn, 6, confidence=0.3, low=(), agent="other", customer="zenith")
    only_acme_docs = review.claim_next(conn, "x", TaskFilter(customers=("acme",), agents=("docs",)))
    assert review.read(conn, only_acme_docs.review_id).task_id == e
    assert review.claim_next(conn, "y", TaskFilter(customers=("acme",))) is None
    assert review.read(conn, review.claim_next(conn, "y", TaskFilter(agents=("other",))).review_id).task_id == f


def test_a_reviewer_gets_back_the_document_they_hold(conn):
    make_agent(conn, settings=NO_SAMPLE)
    make_reviewable(conn, 1)
    make_reviewable(conn, 2)
    first = review.claim_next(conn, "ann")
    assert review.claim_next(conn, "ann") == first
    assert review.claim_next(conn, "bob").review_id != first.review_id


def test_a_lapsed_claim_goes_to_the_next_reviewer_and_its_late_save_is_refused(conn):
    make_agent(conn, settings=NO_SAMPLE)
    make_reviewable(conn, 1)
    now = _now(conn)
    ann = review.claim_next(conn, "ann", lease_seconds=60, now=now)
    assert review.claim_next(conn, "bob", now=now + timedelta(seconds=30)) is None
    bob = review.claim_next(conn, "bob", now=now + timedelta(seconds=61))
    assert bob.review_id == ann.review_id and bob.claim_token > ann.claim_token
    with pytest.raises(StaleReview, match="bob holds it now"):
        review.save(conn, ann.review_id, ann.claim_token, "ann", {"total": 1.0}, now=now + timedelta(seconds=62))
    with pytest.raises(StaleReview):
        review.decide(conn, ann.review_id, ann.claim_token, "ann", ReviewStatus.APPROVED, values={"tax": 2.0})
    assert review.read(conn, ann.review_id).corrections == []
    # A lapsed lease nobody took over still lets its holder save (like a late heartbeat).
    later = now + timedelta(seconds=200)
    assert review.save(conn, bob.review_id, bob.claim_token, "bob", {"total": 1.0}, now=later) == 1


def test_corrections_are_a_trail_and_the_approved_values_apply_them(conn):
    make_agent(conn, settings=NO_SAMPLE)
    pdf = invoice_pdf(7)
    task = queue.enqueue(conn, agent="docs", document_uri="file:///docs/x.pdf", estimated_tokens=1000)
    complete_with(conn, task.id, "docs", invoice_result(7, pdf, low=("total",), wrong={"total": 9.99}), 0.8)
    claim = review.claim_next(conn, "ann@example.com")
    assert review.save(conn, claim.review_id, claim.claim_token, "ann@example.com",
                       {"total": 1198.33, "currency": "EUR"}, reason="read from the page") == 1
    assert review.save(conn, claim.review_id, claim.claim_token, "ann@example.com", {"total": 1198.33}) == 0
    review.decide(conn, claim.review_id, claim.claim_token, "ann@example.com", ReviewStatus.APPROVED,
                  values={"tax": 191.33})
    done = review.read(conn, claim.review_id)
    assert done.status is ReviewStatus.APPROVED and done.decided_by == "ann@example.com"
    # Values equal to the document's now (tax, currency) leave no row: only the total changed.
    assert [(c.field, c.old_value, c.new_value, c.actor) for c in done.corrections] == [
        ("total", 9.99, 1198.33, "ann@example.com")]
    assert done.corrections[0].reason == "read from the page"
    assert done.values["total"] == 1198.33 and done.fields["total"]["value"] == 9.99  # both stay readable
    with pytest.raises(StaleReview, match=r"already approved by ann@example\.com"):
        review.save(conn, claim.review_id, claim.claim_token, "ann@example.com", {"total": 1.0})


def test_the_trail_and_decided_reviews_never_change(conn):
    make_agent(conn, settings=NO_SAMPLE)
    make_reviewable(conn, 1)
    claim = review.claim_next(conn, "ann")
    review.save(conn, claim.review_id, claim.claim_token, "ann", {"total": 5.0})
    review.decide(conn, claim.review_id, claim.claim_token, "ann", ReviewStatus.REJECTED, note="not an invoice")
    for statement in ("UPDATE review_corrections SET new_value = '1'", "DELETE FROM review_corrections",
"UPDATE review_events SET kind = 'x'",
                      "DELETE FROM review_events", "UPDATE reviews SET decided_by = 'mallory'",
                      "DELETE FROM reviews"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
    assert review.read(conn, claim.review_id).decided_by == "ann"


def test_a_re_extraction_ends_the_open_review_and_starts_a_new_one(conn):
    make_agent(conn, settings=NO_SAMPLE)
    first = make_reviewable(conn, 1)
    claim = review.claim_next(conn, "ann")
    [retried] = [queue.retry(conn, first, actor="op")]
    child_id = conn.execute("SELECT id FROM tasks WHERE parent_id = %s", (first,)).fetchone()["id"]
    assert retried is not None
    with pytest.raises(StaleReview, match="re-extracted meanwhile"):
        review.save(conn, claim.review_id, claim.claim_token, "ann", {"total": 1.0})
    assert review.read(conn, claim.review_id).status is ReviewStatus.SUPERSEDED
    # The child is confident: it is reviewed all the same, because its parent was.
    complete_with(conn, child_id, "docs", invoice_result(1, invoice_pdf(1)), 0.95)
    child_review = review.review_of_task(conn, child_id)
    assert review.read(conn, child_review).reason == "re-extraction"
    history = review.history_of_task(conn, child_id)
    assert [(h["task_id"], h["status"]) for h in history] == [(child_id, "open"), (first, "superseded")]


def test_review_changes_are_notified(conn, connect):
    make_agent(conn, settings=NO_SAMPLE)
    listener = connect()
    listener.execute("LISTEN quire_reviews")
    make_reviewable(conn, 1)
    claim = review.claim_next(conn, "ann")
    review.save(conn, claim.review_id, claim.claim_token, "ann", {"total": 3.0})
    review.decide(conn, claim.review_id, claim.claim_token, "ann", ReviewStatus.APPROVED)
    import json

    kinds = []
    for note in listener.notifies(timeout=5, stop_after=4):
        kinds += [item["k"] for item in json.loads(note.payload)]
    assert kinds == ["queued", "claimed", "corrected", "approved"]
    assert [e["kind"] for e in review.events_after(conn, 0)] == kinds


def test_reviewers_racing_for_next_each_document_is_reviewed_once(conn, connect):
    make_agent(conn, settings=NO_SAMPLE)
    tasks = [make_reviewable(conn, n, confidence=0.3 + (n % 5) / 10) for n in range(1, 41)]
    start = threading.Barrier(8)
    reviewed: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def reviewer(name: str) -> None:
        mine: list[int] = []
        reviewed[name] = mine
        try:
            own = connect()
            start.wait(timeout=30)
            while True:
                claim = review.claim_next(own, name)
                if claim is None:
                    return
                review.save(own, claim.review_id, claim.claim_token, name, {"reviewed_by": name})
                review.decide(own, claim.review_id, claim.claim_token, name, ReviewStatus.APPROVED)
                mine.append(claim.review_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=reviewer, args=(f"reviewer-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    everything = [r for ids in reviewed.values() for r in ids]
    assert len(everything) == len(set(everything)) == len(tasks)
    rows = conn.execute("SELECT r.task_id, r.status::text AS status, r.decided_by, "
                        "(SELECT count(*) FROM review_events e WHERE e.review_id = r.id AND e.kind = 'claimed') AS claims "
                        "FROM reviews r").fetchall()
    assert sorted(r["task_id"] for r in rows) == sorted(tasks)
    assert {r["status"] for r in rows} == {"approved"} and {r["claims"] for r in rows} == {1}
    by_id = {r: name for name, ids in reviewed.items() for r in ids}
    for review_id, name in by_id.items():
        assert review.read(conn, review_id).decided_by == name
