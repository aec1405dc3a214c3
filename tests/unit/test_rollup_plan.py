"""How a date range splits into whole rollup buckets and raw ends, for every grain set the reads use."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest

from schema import rollups
from schema.rollups import ALL, DAY, HOUR, MONTH, WEEK

GRAIN_SETS = sorted({*rollups.TOTALS_GRAINS.values(), *rollups.BINS_GRAINS.values(),
                     *(rollups.throughput_grains(scope, timedelta(days=d)) for scope in (True, False) for d in (1, 7))})


def _random_moment(rng: random.Random) -> datetime:
    moment = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(3 * 365 * 24 * 60))
    # Boundaries are where plans go wrong: land on a month, a Monday, a midnight or an hour often.
    return rng.choice([moment, rollups._floor(moment, MONTH), rollups._floor(moment, WEEK),
                       rollups._floor(moment, DAY), rollups._floor(moment, HOUR)])


@pytest.mark.parametrize("grains", GRAIN_SETS, ids="".join)
def test_a_plan_covers_the_range_once_in_whole_buckets_within_its_limits(grains):
    rng = random.Random("".join(grains))
    finest = grains[-1]
    for _ in range(400):
        lo, hi = sorted((_random_moment(rng), _random_moment(rng)))
        # Bounded ranges half the time, an open end a quarter each.
        date_from, date_to = rng.choice([(lo, hi), (lo, hi), (lo, None), (None, hi)])
        pieces = rollups.plan(date_from, date_to, grains)
        rollups.plan_params(date_from, date_to, grains)  # within the fragments' ranges per grain
        ranges = sorted((a, b, kind) for kind, spans in pieces.items() for a, b in spans)
        if date_from == date_to:
            assert ranges == []
            continue
        start, end = date_from or rollups.NEVER_BEFORE, date_to or rollups.NEVER_AFTER
        assert ranges[0][0] == start and ranges[-1][1] == end, (date_from, date_to, pieces)
        for (_, end_of_one, _), (start_of_next, _, _) in itertools.pairwise(ranges):
            assert end_of_one == start_of_next, ("a gap or an overlap", date_from, date_to, pieces)
        for a, b, kind in ranges:
            if kind in (ALL, "r") or a == rollups.NEVER_BEFORE or b == rollups.NEVER_AFTER:
                continue  # raw, or the open bucket before or after the range's bounded part
            cur = a
            while cur < b:  # whole buckets of the grain, end to end
                assert rollups._floor(cur, kind) == cur, (kind, a, b)
                cur = rollups._next(cur, kind)
            assert cur == b, (kind, a, b)
        # A raw part holds no whole bucket of the finest grain: the tasks read raw are the fewest.
        for a, b in pieces["r"]:
            first_whole = a if rollups._floor(a, finest) == a else rollups._next(a, finest)
            assert a < b and rollups._next(first_whole, finest) > b, (grains, a, b)


def test_a_customers_year_reads_at_most_a_few_days_from_the_tasks():
    # One customer's histograms have months and weeks (migration 0036): a year from Saturday the 6th
    # reads two days and three days raw, where months alone read 26.
    start = datetime(2025, 12, 6, tzinfo=UTC)
    pieces = rollups.plan(start, None, rollups.BINS_GRAINS[False])
    assert pieces["r"] == [(start, datetime(2025, 12, 8, tzinfo=UTC)),
                           (datetime(2025, 12, 29, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))]
    assert pieces["w"] == [(datetime(2025, 12, 8, tzinfo=UTC), datetime(2025, 12, 29, tzinfo=UTC))]
    assert pieces["m"] == [(datetime(2026, 1, 1, tzinfo=UTC), rollups.NEVER_AFTER)]
    # A range shorter than a month takes the week across the month's start: no month fits there.
    pieces = rollups.plan(datetime(2026, 1, 20, tzinfo=UTC), datetime(2026, 2, 20, tzinfo=UTC), (ALL, MONTH, WEEK))
    assert pieces["w"] == [(datetime(2026, 1, 26, tzinfo=UTC), datetime(2026, 2, 16, tzinfo=UTC))]
    assert pieces["m"] == []
    # Both ends cut a month, and weeks too: two raw parts at each end, none longer than six days.
    pieces = rollups.plan(datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 5, 20, tzinfo=UTC), (ALL, MONTH, WEEK))
    assert pieces["r"] == [(datetime(2026, 1, 10, tzinfo=UTC), datetime(2026, 1, 12, tzinfo=UTC)),
                           (datetime(2026, 1, 26, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)),
                           (datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 5, 4, tzinfo=UTC)),
                           (datetime(2026, 5, 18, tzinfo=UTC), datetime(2026, 5, 20, tzinfo=UTC))]
    assert pieces["m"] == [(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC))]
    assert len(pieces["w"]) == 2
