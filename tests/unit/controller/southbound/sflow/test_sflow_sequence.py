from controller.southbound.sflow.sequence import SequenceFilter

SRC = ("127.0.0.1", 0, 2, 1000)


def test_new_numbers_accepted_replays_refused():
    f = SequenceFilter(window=64)
    assert [f.accept(SRC, s) for s in (1, 2, 3)] == [True] * 3
    assert not f.accept(SRC, 2) and not f.accept(SRC, 3)
    assert f.replayed == 2


def test_reordering_inside_the_window_is_fine_once():
    f = SequenceFilter(window=64)
    assert f.accept(SRC, 10) and f.accept(SRC, 15)
    assert f.accept(SRC, 12) and f.accept(SRC, 11)  # late but unseen
    assert not f.accept(SRC, 12)
    assert f.accept(SRC, 100)  # a jump (lost datagrams) clears the bitmap
    assert not f.accept(SRC, 100) and f.accept(SRC, 99)


def test_sources_are_independent():
    f = SequenceFilter()
    other = ("127.0.0.1", 1, 2, 1001)
    assert f.accept(SRC, 5) and f.accept(other, 5) and not f.accept(SRC, 5)


def test_stale_numbers_refused_until_a_restart_is_evident():
    f = SequenceFilter(window=64, restart_after=4)
    assert f.accept(SRC, 10_000)
    assert [f.accept(SRC, s) for s in (1, 2, 3)] == [False] * 3 and f.stale == 3
    assert f.accept(SRC, 4) and f.restarts == 1  # the fourth in a row: the agent restarted from 1
    assert f.accept(SRC, 5) and not f.accept(SRC, 4)


def test_wrap_around_of_the_32_bit_counter():
    f = SequenceFilter(window=64)
    assert f.accept(SRC, 2**32 - 2) and f.accept(SRC, 2**32 - 1) and f.accept(SRC, 0) and f.accept(SRC, 1)
    assert not f.accept(SRC, 2**32 - 1)


def test_sources_bounded():
    f = SequenceFilter(max_sources=3)
    for i in range(10):
        f.accept(("a", i), 1)
    assert len(f) == 3
    assert f.accept(("a", 0), 1)  # forgotten long ago: new again
    f.forget(("a", 0))
    assert len(f) == 2
