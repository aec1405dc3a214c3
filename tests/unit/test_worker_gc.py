"""The worker tunes its process's garbage collector once it started."""

import gc

from worker.daemon import GC_YOUNG_THRESHOLD, settle_garbage_collection


def test_start_up_objects_are_frozen_and_young_collections_come_less_often():
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        settle_garbage_collection()
        assert gc.get_freeze_count() > 0, "what start-up loaded is out of the full collections' way"
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 10, 10)
        gc.set_threshold(50_000, 10, 10)
        settle_garbage_collection()
        assert gc.get_threshold()[0] == 50_000, "a higher threshold set by the process is kept"
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
