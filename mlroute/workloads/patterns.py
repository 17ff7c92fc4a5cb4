"""The standard synthetic traffic patterns (Hedera's and the fat-tree literature's, docs/paper.md), seeded.

Hosts are numbered 0..N-1 pod -> edge -> host (for a Clos: ToR -> host), so host h sits under leaf
h // hosts_per_edge and in pod h // hosts_per_pod.  Patterns (``name[:args]``):

* ``stride:i``   host x -> (x + i) mod N (1 <= i mod N).
* ``randbij``    a uniformly random derangement: every host sends one flow and receives one, never to itself.
* ``random``     every host -> a uniformly random *other* host (receivers may collide).
* ``stag:pe,pp`` (staggered) destination under the same edge switch with probability pe, elsewhere in the
  same pod with probability pp, elsewhere in the network otherwise (a Clos is one pod); when the drawn
  category is empty (e.g. one host per edge) the next wider one is used (the narrower ones if none is).
* ``hotspot[:n]`` n senders (default: every other host) -> one random receiver: receiver-bound, routing
  cannot help (a sanity check).

Every pattern is a function of (N, hosts per edge, hosts per pod, seed) only; numpy's default_rng(seed).
"""

from __future__ import annotations

import numpy as np

from mlroute.errors import MlrouteError
from mlroute.routing.flow import Flow
from mlroute.tolerances import ABS_TOL


class PatternError(MlrouteError, ValueError):
    """A pattern name or argument is wrong."""


def _args(spec: str) -> tuple[str, list[str]]:
    name, _, rest = spec.partition(":")
    name = name.strip().lower()
    args = [a.strip() for a in rest.split(",")] if rest.strip() else []
    return name, args


def pattern_pairs(spec: str, n_hosts: int, seed: int = 0, *, hosts_per_edge: int | None = None,
                  hosts_per_pod: int | None = None) -> list[tuple[int, int]]:
    """(src, dst) host pairs of a pattern; see the module docstring."""
    if n_hosts < 2:
        raise PatternError(f"a traffic pattern needs at least 2 hosts (got {n_hosts})")
    name, args = _args(spec)
    make = _BY_NAME.get(name)
    if make is None:
        raise PatternError(f"unknown pattern {spec!r} (one of stride:i, randbij, random, stag:pe,pp, hotspot[:n])")
    rng = np.random.default_rng(seed)
    return make(args, n_hosts, rng, hosts_per_edge or 1, hosts_per_pod or n_hosts)


def _int_arg(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise PatternError(f"{what} must be an integer, not {text!r}") from None


def _no_args(name: str, args: list[str]) -> None:
    if args:
        raise PatternError(f"{name} takes no argument")


def _stride(args, n, rng, he, hp) -> list[tuple[int, int]]:
    if len(args) != 1:
        raise PatternError("stride needs one argument: stride:i")
    i = _int_arg(args[0], "stride argument")
    if i % n == 0:
        raise PatternError(f"stride {i} sends every host to itself on {n} hosts")
    return [(x, (x + i) % n) for x in range(n)]


def _randbij(args, n, rng, he, hp) -> list[tuple[int, int]]:
    _no_args("randbij", args)
    while True:
        perm = rng.permutation(n)
        if not (perm == np.arange(n)).any():
            return [(x, int(perm[x])) for x in range(n)]


def _random(args, n, rng, he, hp) -> list[tuple[int, int]]:
    _no_args("random", args)
    d = rng.integers(0, n - 1, size=n)
    d = d + (d >= np.arange(n))  # skip self
    return [(x, int(d[x])) for x in range(n)]


def _stag(args, n, rng, he, hp) -> list[tuple[int, int]]:
    if len(args) != 2:
        raise PatternError("stag needs two probabilities: stag:p_edge,p_pod")
    try:
        pe, pp = float(args[0]), float(args[1])
    except ValueError:
        raise PatternError(f"stag probabilities must be numbers, not {','.join(args)}") from None
    if pe < 0 or pp < 0 or pe + pp > 1 + ABS_TOL:
        raise PatternError(f"stag probabilities must be >= 0 and sum to at most 1 (got {pe}, {pp})")
    out = []
    for x in range(n):
        d = _stag_destination(x, n, rng, he, hp, pe, pp)
        if d is not None:
            out.append((x, d))
    return out


_STAG_CATEGORIES = ("edge", "pod", "other")


def _stag_destination(x: int, n: int, rng, he: int, hp: int, pe: float, pp: float) -> int | None:
    """Draw the category (same edge, same pod, elsewhere), falling back to the next wider, then the narrower
    ones when it is empty; then a uniform host of it."""
    e0 = (x // he) * he
    p0 = (x // hp) * hp
    pod_size = min(p0 + hp, n) - p0
    same_edge = [h for h in range(e0, min(e0 + he, n)) if h != x]
    same_pod = [h for h in range(p0, min(p0 + hp, n)) if not e0 <= h < e0 + he]
    u = rng.random()
    want = 0 if u < pe else (1 if u < pe + pp else 2)
    cats = list(_STAG_CATEGORIES)
    for cat in cats[want:] + cats[:want][::-1]:
        if cat == "edge" and same_edge:
            return int(same_edge[rng.integers(len(same_edge))])
        if cat == "pod" and same_pod:
            return int(same_pod[rng.integers(len(same_pod))])
        if cat == "other" and n - pod_size > 0:
            k = int(rng.integers(n - pod_size))
            return k if k < p0 else k + pod_size
    return None


def _hotspot(args, n, rng, he, hp) -> list[tuple[int, int]]:
    if len(args) > 1:
        raise PatternError("hotspot takes at most one argument: hotspot[:senders]")
    k = n - 1
    if args:
        k = _int_arg(args[0], "hotspot senders")
        if not 1 <= k <= n - 1:
            raise PatternError(f"hotspot senders must be between 1 and {n - 1} (got {k})")
    target = int(rng.integers(n))
    others = np.array([h for h in range(n) if h != target])
    senders = np.sort(rng.choice(others, size=k, replace=False))
    return [(int(s), target) for s in senders]


#: pattern name (and aliases) -> generator(args, n_hosts, rng, hosts per edge, hosts per pod)
_BY_NAME = {
    "stride": _stride,
    "randbij": _randbij, "random_bijective": _randbij, "bijective": _randbij,
    "random": _random,
    "stag": _stag, "staggered": _stag,
    "hotspot": _hotspot,
}


def pattern_flows(spec: str, n_hosts: int | None = None, seed: int = 0, *, fabric=None,
                  hosts_per_edge: int | None = None, hosts_per_pod: int | None = None) -> list[Flow]:
    """Flows of a pattern.  Give ``fabric`` (a generated :class:`~mlroute.routing.fabric.Fabric`) or the
    numbers: ``n_hosts`` and, for ``stag``, ``hosts_per_edge`` / ``hosts_per_pod``."""
    if fabric is not None:
        n_hosts = getattr(fabric, "n_hosts", None) or len(fabric.hosts)
        hosts_per_edge = hosts_per_edge or fabric.hosts_per_tor
        if hosts_per_pod is None and getattr(fabric, "k", None):
            hosts_per_pod = fabric.k * fabric.k // 4
    if n_hosts is None:
        raise PatternError("pattern_flows needs n_hosts or a fabric")
    return [Flow(s, d) for s, d in pattern_pairs(spec, n_hosts, seed, hosts_per_edge=hosts_per_edge,
                                                 hosts_per_pod=hosts_per_pod)]
