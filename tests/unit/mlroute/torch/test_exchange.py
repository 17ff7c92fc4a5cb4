"""Rank -> address through the store: keyed per group and per declaration, with a bounded wait."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mlroute.torch import exchange


class DictStore:
    """The c10d.Store calls the exchange makes (set / wait with a timeout / get returning bytes)."""

    def __init__(self):
        self.data: dict[str, bytes] = {}
        self.waits: list[timedelta] = []

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def wait(self, keys, timeout):
        self.waits.append(timeout)
        missing = [k for k in keys if k not in self.data]
        if missing:
            raise RuntimeError(f"Wait timeout: {missing}")

    def get(self, key):
        return self.data[key]


def test_gather_returns_addresses_in_group_rank_order_with_a_bounded_wait():
    store = DictStore()
    prefix = exchange.key_prefix([4, 6, 7], 0)
    for rank, addr in ((7, "c"), (4, "a"), (6, "b")):
        exchange.publish(store, prefix, rank, addr)
    assert exchange.gather(store, prefix, [4, 6, 7], timeout_s=3) == ["a", "b", "c"]
    assert store.waits == [timedelta(seconds=3)]


def test_a_second_declaration_of_the_same_group_does_not_read_the_first_ones_answers():
    store = DictStore()
    first, second = exchange.key_prefix([0, 1], 0), exchange.key_prefix([0, 1], 1)
    exchange.publish(store, first, 0, "old0")
    exchange.publish(store, first, 1, "old1")
    exchange.publish(store, second, 0, "new0")
    assert first != second and exchange.key_prefix([0, 2], 0) != first
    with pytest.raises(RuntimeError, match="Wait timeout"):  # rank 1 has not published for this declaration yet
        exchange.gather(store, second, [0, 1], timeout_s=0.1)
