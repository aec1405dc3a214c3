"""Which events make an open dashboard read its table's first page again."""

from __future__ import annotations

from schema.stats_types import HELD, StreamEvent, TaskFilter, page_touched


def event(task_id: int, agent: str, status: str, prev: str | None) -> StreamEvent:
    return StreamEvent.from_notify({"e": task_id, "id": task_id, "a": agent, "s": status, "p": prev})


SUBMITTED = event(100, "drain", "enqueued", None)
CLAIMED = event(100, "drain", "processing", "enqueued")
COMPLETED = event(100, "drain", "completed", "processing")
FAILED = event(100, "drain", "failed", "processing")


def test_a_task_shown_that_changes_always_counts():
    assert page_touched(TaskFilter(agents=("other",), statuses=("failed",)), {100}, [CLAIMED])


def test_another_agents_churn_leaves_an_agent_filter_alone():
    flt = TaskFilter(agents=("agent-1",))
    assert not page_touched(flt, {1, 2}, [SUBMITTED, CLAIMED, COMPLETED, FAILED])
    assert page_touched(TaskFilter(agents=("drain",)), {1, 2}, [SUBMITTED])


def test_a_submission_counts_only_where_its_status_can_be_shown():
    assert page_touched(TaskFilter(), set(), [SUBMITTED])
    assert not page_touched(TaskFilter(statuses=("failed",)), set(), [SUBMITTED])
    assert page_touched(TaskFilter(statuses=("enqueued",)), set(), [SUBMITTED])
    assert page_touched(TaskFilter(statuses=(HELD,)), set(), [SUBMITTED])  # an upload held for review


def test_a_task_joins_a_status_filter_or_the_review_queue_when_it_takes_that_status():
    assert page_touched(TaskFilter(statuses=("failed",)), set(), [FAILED])
    assert not page_touched(TaskFilter(statuses=("failed",)), set(), [CLAIMED, COMPLETED])
    assert page_touched(TaskFilter(needs_review=True), set(), [COMPLETED])
    assert not page_touched(TaskFilter(needs_review=True), set(), [CLAIMED])
    # Without a status filter a task not shown keeps its place in or out of the page.
    assert not page_touched(TaskFilter(), set(), [CLAIMED, COMPLETED])


def test_customer_and_dates_are_not_known_from_an_event_so_they_rule_nothing_out():
    assert page_touched(TaskFilter(customers=("nobody",)), set(), [SUBMITTED])
