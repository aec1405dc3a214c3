"""The batch forecast's finish time: runs start in queue order, each as soon as a slot frees."""

import pytest

from schema.forecast import finish_time


def test_many_short_runs_take_their_summed_time_over_the_slots():
    assert finish_time([1.0] * 100, 4) == pytest.approx(25.0)


def test_one_long_run_last_ends_alone_and_first_runs_beside_the_rest():
    short = [2.0] * 10
    assert finish_time([*short, 30.0], 2) == pytest.approx(10 + 30)
    assert finish_time([30.0, *short], 2) == pytest.approx(30)


def test_a_single_document_takes_its_whole_run_however_many_slots():
    assert finish_time([12.0], 4) == pytest.approx(12.0)


def test_work_ahead_is_spread_over_the_slots_first():
    assert finish_time([3.0], 3, busy_seconds=30.0) == pytest.approx(10 + 3)


def test_an_overlap_below_the_slots_stretches_each_run():
    # Two slots that overlapped 1.6 runs on average: 16 one-second runs take 10 s, not 8.
    assert finish_time([1.0] * 16, 1.6) == pytest.approx(10.0)
    assert finish_time([1.0] * 16, 1.0) == pytest.approx(16.0)
