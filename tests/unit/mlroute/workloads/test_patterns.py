"""Standard traffic patterns (docs/paper.md): shapes, seeding, errors, and the idealised k=4 figures."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlroute.routing.metric import report
from mlroute.routing.optimisers import OPTIMISERS
from mlroute.workloads.patterns import PatternError, pattern_flows, pattern_pairs


def test_stride():
    assert pattern_pairs("stride:4", 16)[:3] == [(0, 4), (1, 5), (2, 6)]
    assert pattern_pairs("stride:4", 16)[-1] == (15, 3)
    with pytest.raises(PatternError):
        pattern_pairs("stride:16", 16)
    with pytest.raises(PatternError):
        pattern_pairs("stride", 16)
    with pytest.raises(PatternError):
        pattern_pairs("stride:x", 16)


@given(st.integers(2, 64), st.integers(0, 10_000))
def test_randbij_is_a_derangement(n, seed):
    pairs = pattern_pairs("randbij", n, seed)
    assert sorted(s for s, _ in pairs) == list(range(n))
    assert sorted(d for _, d in pairs) == list(range(n))
    assert all(s != d for s, d in pairs)
    assert pairs == pattern_pairs("randbij", n, seed)


@given(st.integers(2, 64), st.integers(0, 10_000))
def test_random_never_sends_to_itself(n, seed):
    pairs = pattern_pairs("random", n, seed)
    assert [s for s, _ in pairs] == list(range(n))
    assert all(s != d and 0 <= d < n for s, d in pairs)


def test_staggered_probabilities():
    n, he, hp = 1024, 4, 16
    pairs = pattern_pairs("stag:0.5,0.3", n, 3, hosts_per_edge=he, hosts_per_pod=hp)
    cats = Counter("edge" if s // he == d // he else "pod" if s // hp == d // hp else "other" for s, d in pairs)
    assert all(s != d for s, d in pairs)
    assert abs(cats["edge"] / n - 0.5) < 0.06 and abs(cats["pod"] / n - 0.3) < 0.06
    # one host per edge: the edge category is empty, the pod is used instead
    solo = pattern_pairs("stag:1,0", 8, 1, hosts_per_edge=1, hosts_per_pod=4)
    assert all(s // 4 == d // 4 and s != d for s, d in solo)
    with pytest.raises(PatternError):
        pattern_pairs("stag:0.8,0.5", 8)


def test_hotspot_and_unknown():
    pairs = pattern_pairs("hotspot:5", 16, 2)
    assert len(pairs) == 5 and len({d for _, d in pairs}) == 1 and all(s != d for s, d in pairs)
    assert len(pattern_pairs("hotspot", 16, 2)) == 15
    with pytest.raises(PatternError, match="unknown pattern"):
        pattern_pairs("zipf", 16)


def test_pattern_flows_from_a_fabric(fattree4):
    fab = fattree4
    flows = pattern_flows("stag:0,1", seed=0, fabric=fab)  # hosts per edge 2, per pod 4
    assert len(flows) == 16
    assert all(f.src // 4 == f.dst // 4 and f.src // 2 != f.dst // 2 for f in flows)


@pytest.mark.parametrize("spec", ["stride:4", "stride:8", "stride:2", "randbij", "stride:1", "hotspot"])
def test_best_single_path_routing_reaches_the_ideal_on_k4(spec, fattree4):
    """docs/paper.md: on a k=4 fat-tree the best single-path routing reaches 100 % of the non-blocking ideal on
    stride 2/4/8 and random bijective traffic; stride 1 and hotspot are 100 % for every routing."""
    fab = fattree4
    flows = pattern_flows(spec, seed=1, fabric=fab)
    rep = report(fab, flows, OPTIMISERS["mlroute"](fab, flows).paths)
    assert rep["fraction_of_ideal"] == pytest.approx(1.0)
    if spec in ("stride:4", "stride:8"):
        ecmp = report(fab, flows, OPTIMISERS["ecmp"](fab, flows, seed=1).paths)
        assert ecmp["fraction_of_ideal"] < 0.95
