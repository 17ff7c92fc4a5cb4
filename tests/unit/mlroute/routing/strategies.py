"""Hypothesis strategies for random routing instances (small enough for brute force and the ILP)."""

from __future__ import annotations

from hypothesis import strategies as st

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow


@st.composite
def flows_on(draw, n_hosts, min_size=1, max_size=24, demands=False, jobs=False):
    # (a, b') with b' in 0..n-2, shifted past a: uniform over ordered pairs of distinct hosts, no filtering
    raw = draw(st.lists(st.tuples(st.integers(0, n_hosts - 1), st.integers(0, n_hosts - 2)),
                        min_size=min_size, max_size=max_size))
    pairs = [(a, b + (b >= a)) for a, b in raw]
    out = []
    for a, b in pairs:
        d = draw(st.one_of(st.none(), st.sampled_from([0.25, 0.5, 1.0]))) if demands else None
        j = draw(st.sampled_from(["a", "b", "c", None])) if jobs else None
        out.append(Flow(a, b, demand=d, job=j))
    return out


@st.composite
def clos_instance(draw, max_tors=6, max_spines=5, max_hosts=3, failed_links=False, **flow_kw):
    """(fabric, flows): a 2-tier Clos with some failed spines (never all), optionally failed cables."""
    t = draw(st.integers(2, max_tors))
    s = draw(st.integers(1, max_spines))
    h = draw(st.integers(1, max_hosts))
    failed = draw(st.sets(st.integers(0, s - 1), max_size=s - 1))
    fab = Fabric.clos(t, s, h, failed_spines=sorted(failed))
    if failed_links:
        cables = [(f"tor{i}", f"spine{j}") for i in range(t) for j in range(s)]
        for u, v in draw(st.lists(st.sampled_from(cables), max_size=3, unique=True)):
            fab.fail_link(u, v)
    flows = draw(flows_on(t * h, **flow_kw))
    return fab, flows


@st.composite
def fattree_instance(draw, failures=True, **flow_kw):
    """(fabric, flows): a k=4 fat-tree with a few failed cores, aggregation switches or cables."""
    fab = Fabric.fattree(4)
    if failures:
        for c in draw(st.sets(st.integers(0, 3), max_size=2)):
            fab.fail_switch(f"core{c}")
        for p, i in draw(st.sets(st.tuples(st.integers(0, 3), st.integers(0, 1)), max_size=1)):
            fab.fail_switch(f"agg{p}_{i}")
        cables = [(f"edge{p}_{i}", f"agg{p}_{j}") for p in range(4) for i in range(2) for j in range(2)] + \
                 [(f"agg{p}_{i}", f"core{i * 2 + j}") for p in range(4) for i in range(2) for j in range(2)]
        for u, v in draw(st.lists(st.sampled_from(cables), max_size=2, unique=True)):
            fab.fail_link(u, v)
    flows = draw(flows_on(16, **flow_kw))
    return fab, flows


any_instance = st.one_of(clos_instance(), clos_instance(failed_links=True), fattree_instance())
