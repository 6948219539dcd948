"""A worker's long-lived tables: built with the garbage collector paused, then frozen (bioel_core.heap)."""

import gc

import pytest

from bioel_core.heap import long_lived


@pytest.fixture(autouse=True)
def collector_restored():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_block_runs_without_the_collector_and_what_it_made_is_frozen():
    gc.enable()
    gc.unfreeze()
    with long_lived():
        assert not gc.isenabled()
        tables = [(str(i), (f"C{i}",)) for i in range(10_000)]
        assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    # the list and its tuples are out of the generations later collections walk
    assert gc.get_freeze_count() >= len(tables)
    assert gc.is_tracked(tables) and all(o is not tables for o in gc.get_objects())


def test_a_failed_block_freezes_nothing_and_gives_the_collector_back():
    gc.enable()
    gc.unfreeze()
    with pytest.raises(ValueError), long_lived():
        [(i,) for i in range(1_000)]
        raise ValueError("a KB table that cannot be read")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_collector_switched_off_by_the_caller_stays_off():
    gc.disable()
    with long_lived():
        pass
    assert not gc.isenabled()
