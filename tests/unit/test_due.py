"""A page section's refresh rhythm: due once marked, at most once per interval, forced at will."""

from __future__ import annotations

from app.components.due import Due


def test_a_section_is_read_once_marked_and_not_again_within_its_interval():
    due = Due(3600)
    assert not due.take()  # nothing changed yet
    due.mark()
    assert due.take()       # marked, and never read: read now
    assert not due.marked
    due.mark()
    assert not due.take()   # marked again within the hour: it waits, still marked
    assert due.marked
    assert due.take(force=True)  # an action forces the read
    assert not due.marked


def test_a_read_that_was_not_current_stays_marked_and_expire_makes_it_due_at_once():
    due = Due(3600)
    due.settle(current=False)
    assert due.marked and not due.ready()
    due.expire()
    assert due.take()
    due.settle(current=True)
    assert not due.marked


def test_without_an_interval_a_mark_is_taken_at_every_turn():
    due = Due(0)
    assert not due.take()
    due.mark()
    assert due.take() and not due.take()
