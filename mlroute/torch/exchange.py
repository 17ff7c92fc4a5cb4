"""Rank -> host address through the process group's key-value store (the rendezvous store).

Not ``all_gather_object``: that is itself a collective on the fabric (an r -> r+1 all-gather) which would run
before the job is declared; the store is a TCP connection to the master that every rank already holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any


def key_prefix(ranks: Sequence[int], generation: int, kind: str = "addr") -> str:
    """The keys of one exchange: what it is for (``addr``: a declaration; ``order``: the node order asked of the
    controller), the group's global ranks and how many times this process exchanged for that same group before
    (every member declares the same groups in the same order, so the count agrees; a second init_process_group
    in one run must not read the first one's answers)."""
    return f"mlroute/{kind}/{generation}/{'.'.join(map(str, ranks))}"


def publish(store: Any, prefix: str, rank: int, address: str) -> None:
    """This rank's address under the exchange's prefix (``rank`` = global rank)."""
    store.set(f"{prefix}/{rank}", address)


def gather(store: Any, prefix: str, ranks: Sequence[int], timeout_s: float) -> list[str]:
    """Every member's address in the order of ``ranks``; the store's error when one has not published within
    ``timeout_s`` (a bounded wait, not the store's 30-minute default)."""
    keys = [f"{prefix}/{r}" for r in ranks]
    store.wait(keys, timedelta(seconds=timeout_s))
    return [text(store.get(k)) for k in keys]


def answer(store: Any, prefix: str, value: str) -> None:
    """The exchange's one answer (from the rank that decides, to every member)."""
    store.set(f"{prefix}/answer", value)


def read_answer(store: Any, prefix: str, timeout_s: float) -> str:
    """The exchange's answer once it is there; the store's error after ``timeout_s``."""
    store.wait([f"{prefix}/answer"], timedelta(seconds=timeout_s))
    return text(store.get(f"{prefix}/answer"))


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
