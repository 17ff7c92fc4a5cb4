"""The optimisers: one interface, one module each.

Every entry of :data:`OPTIMISERS` is ``optimise(fabric, flows, *, seed=0, objective="flow", previous=None,
time_limit=None) -> Routing``: one path per flow (switch names, source leaf first; ``None`` if the flow has no
live path), in input order.  ``objective`` is "flow" (leximin over flow rates) or "job" (leximin over job
rates, then flows); ``previous`` (a list of paths) lets an optimiser keep flows where they are (``mlroute``
does; the baselines recompute from scratch, as the paper's greedy does, and ``Routing.changed(previous)``
says which paths to push);
``time_limit`` (seconds) bounds the search of the optimisers that search.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping

from mlroute.routing.optimisers.base import Problem, Routing  # noqa: F401

__all__ = ["ALGORITHMS", "OPTIMISERS", "Problem", "Routing", "optimise"]

#: Every routing scheme by name, the baseline first: the one list the config, the CLI, the simulator and the
#: experiments validate against.
ALGORITHMS = ("ecmp", "mlroute", "greedy", "coloring", "annealing", "ilp", "gff")


class _Registry(Mapping):
    """name -> ``optimise`` function, importing an optimiser's module on first use (``ilp`` pulls in scipy,
    which costs half a second at controller start when nobody asked for it)."""

    def __getitem__(self, name: str) -> Callable[..., Routing]:
        if name not in ALGORITHMS:
            raise KeyError(name)
        return importlib.import_module(f"{__name__}.{name}").optimise

    def __iter__(self) -> Iterator[str]:
        return iter(ALGORITHMS)

    def __len__(self) -> int:
        return len(ALGORITHMS)


OPTIMISERS: Mapping[str, Callable[..., Routing]] = _Registry()


def optimise(name: str, fabric, flows, **kw) -> Routing:
    """Run the optimiser called ``name``."""
    try:
        fn = OPTIMISERS[name]
    except KeyError:
        raise ValueError(f"unknown optimiser {name!r} (one of {', '.join(ALGORITHMS)})") from None
    return fn(fabric, flows, **kw)
