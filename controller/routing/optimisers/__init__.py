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

from controller.routing.optimisers import annealing, coloring, ecmp, gff, greedy, ilp, mlroute
from controller.routing.optimisers.base import Problem, Routing  # noqa: F401

__all__ = ["OPTIMISERS", "Problem", "Routing", "optimise"]

OPTIMISERS = {
    "mlroute": mlroute.optimise,
    "greedy": greedy.optimise,
    "ecmp": ecmp.optimise,
    "coloring": coloring.optimise,
    "annealing": annealing.optimise,
    "ilp": ilp.optimise,
    "gff": gff.optimise,
}


def optimise(name: str, fabric, flows, **kw) -> Routing:
    """Run the optimiser called ``name``."""
    try:
        fn = OPTIMISERS[name]
    except KeyError:
        raise ValueError(f"unknown optimiser {name!r} (one of {', '.join(OPTIMISERS)})") from None
    return fn(fabric, flows, **kw)
