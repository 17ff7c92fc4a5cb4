"""The optimisers: valid live paths, the 2-tier optimum, mlroute >= greedy, ILP agreement, baselines' rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.metric import compare, rates
from mlroute.routing.optimisers import OPTIMISERS, Problem, optimise
from mlroute.routing.optimisers.bipartite_colouring import edge_colouring
from mlroute.routing.optimisers.greedy import group_order

from .strategies import any_instance, clos_instance, fattree_instance

FAST = ["mlroute", "greedy", "ecmp", "coloring", "annealing", "gff"]


def max_load(fab, flows, paths):
    prob = Problem(fab, flows)
    return prob.max_load(prob.choice_from_paths(paths))


def check_valid(fab, flows, paths):
    assert len(paths) == len(flows)
    for f, p in zip(flows, paths):
        cands = fab.candidate_paths(f)
        if not cands:
            assert p is None
        else:
            assert tuple(p) in set(cands), (f, p)
            assert all(fab.is_live(n) for n in p)


@given(any_instance, st.sampled_from(FAST))
def test_every_flow_gets_a_valid_live_path(inst, algo):
    fab, flows = inst
    check_valid(fab, flows, OPTIMISERS[algo](fab, flows, seed=3).paths)


@given(clos_instance())
def test_coloring_and_mlroute_reach_the_lower_bound_on_two_tier(inst):
    fab, flows = inst
    bound = Problem(fab, flows).degree_bound()
    for algo in ("coloring", "mlroute"):
        r = OPTIMISERS[algo](fab, flows)
        assert max_load(fab, flows, r.paths) == bound, algo


@given(clos_instance(max_tors=8, max_spines=4, max_hosts=4, max_size=40))
def test_mlroute_optimal_on_denser_two_tier(inst):
    fab, flows = inst
    r = OPTIMISERS["mlroute"](fab, flows)
    assert max_load(fab, flows, r.paths) == Problem(fab, flows).degree_bound()
    assert r.info["max_link_load"] == r.info["lower_bound"]


@given(st.one_of(clos_instance(failed_links=True, demands=True), fattree_instance(demands=True),
                 clos_instance(max_size=40)))
def test_mlroute_never_worse_than_greedy(inst):
    fab, flows = inst
    m = OPTIMISERS["mlroute"](fab, flows).paths
    g = OPTIMISERS["greedy"](fab, flows).paths
    assert compare(rates(fab, flows, m), rates(fab, flows, g)) >= 0


@given(st.one_of(clos_instance(failed_links=True, jobs=True), fattree_instance(jobs=True)))
def test_mlroute_never_worse_than_greedy_job_objective(inst):
    fab, flows = inst
    jobs = [f.job for f in flows]
    m = OPTIMISERS["mlroute"](fab, flows, objective="job").paths
    g = OPTIMISERS["greedy"](fab, flows).paths
    assert compare(rates(fab, flows, m), rates(fab, flows, g), jobs, "job") >= 0


@settings(max_examples=12)
@given(clos_instance(max_tors=5, max_spines=3, max_hosts=3, max_size=14))
def test_mlroute_matches_ilp_proven_max_load_on_two_tier(inst):
    fab, flows = inst
    ilp = OPTIMISERS["ilp"](fab, flows, time_limit=20)
    assert ilp.info["proved_optimal"]
    assert max_load(fab, flows, OPTIMISERS["mlroute"](fab, flows).paths) == ilp.info["max_link_load"]
    assert ilp.info["max_link_load"] == Problem(fab, flows).degree_bound()


@settings(max_examples=8)
@given(fattree_instance(max_size=12))
def test_ilp_is_a_lower_bound_on_fattrees(inst):
    fab, flows = inst
    ilp = OPTIMISERS["ilp"](fab, flows, time_limit=20)
    check_valid(fab, flows, ilp.paths)
    if ilp.info["proved_optimal"]:
        for algo in ("mlroute", "greedy", "coloring"):
            assert max_load(fab, flows, OPTIMISERS[algo](fab, flows).paths) >= ilp.info["max_link_load"]


def test_greedy_follows_the_paper_step_by_step():
    # ToR0: hosts 0,1; ToR1: 2,3; ToR2: 4,5.  Groups: dst ToR2 (3 flows) first, then src ToR0, src ToR1 (2
    # each, source groups first), ...  f1, f2, f3 are placed from dst ToR2's group, f0 from src ToR0's.
    fab = Fabric.clos(3, 2, 2)
    flows = [Flow(0, 2), Flow(1, 4), Flow(3, 5), Flow(2, 4)]
    prob = Problem(fab, flows)
    assert group_order(prob).tolist() == [1, 2, 3, 0]
    paths = OPTIMISERS["greedy"](fab, flows).paths
    # f1 -> spine0 (all zero, first minimum); f2: spine0 costs 1 (down to ToR2), spine1 0 -> spine1;
    # f3: both cost 1 -> first, spine0; f0: spine0 costs 1 (ToR0 up), spine1 0 -> spine1
    assert [p[1] for p in paths] == ["spine1", "spine0", "spine1", "spine0"]


def test_greedy_is_only_a_two_approximation_and_mlroute_repairs_it():
    # found by search: Delta = 2 on 2 spines, so the optimum is 1; the greedy puts 2 flows on a link
    fab = Fabric.clos(4, 2, 4)
    flows = [Flow(12, 10), Flow(0, 15), Flow(2, 4), Flow(13, 7)]
    assert Problem(fab, flows).degree_bound() == 1
    assert max_load(fab, flows, OPTIMISERS["greedy"](fab, flows).paths) == 2
    m = OPTIMISERS["mlroute"](fab, flows)
    assert max_load(fab, flows, m.paths) == 1 and m.info["repaired_flows"] >= 1
    assert compare(rates(fab, flows, m.paths), rates(fab, flows, OPTIMISERS["greedy"](fab, flows).paths)) == 1


def test_intra_tor_and_unroutable_flows():
    fab = Fabric.clos(3, 2, 2)
    fab.fail_switch("tor2")
    flows = [Flow(0, 1), Flow(0, 4), Flow(0, 2)]
    for algo in FAST + ["ilp"]:
        paths = OPTIMISERS[algo](fab, flows).paths
        assert paths[0] == ("tor0",) and paths[1] is None and len(paths[2]) == 3, algo


def test_ecmp_is_deterministic_and_seeded():
    fab = Fabric.clos(8, 8, 4)
    flows = [Flow(h, (h + 4) % 32) for h in range(32)]
    a = OPTIMISERS["ecmp"](fab, flows, seed=1).paths
    assert a == OPTIMISERS["ecmp"](fab, flows, seed=1).paths
    assert a != OPTIMISERS["ecmp"](fab, flows, seed=2).paths
    assert len({p[1] for p in a}) > 1


def test_gff_reserves_demands():
    fab = Fabric.clos(2, 2, 4)
    half = [Flow(h, 4 + h, demand=0.5) for h in range(4)]
    paths = OPTIMISERS["gff"](fab, half).paths
    # first fit: two half-demand flows fill spine0's links, the next two go to spine1
    assert [p[1] for p in paths] == ["spine0", "spine0", "spine1", "spine1"]
    full = [Flow(h, 4 + h) for h in range(3)]  # estimated demand 1 each: one per spine, the third is left on ECMP
    r = OPTIMISERS["gff"](fab, full)
    assert [p[1] for p in r.paths[:2]] == ["spine0", "spine1"] and r.info["left_on_ecmp"] == 1


def test_annealing_is_seeded_and_beats_its_start():
    fab = Fabric.clos(8, 4, 4)
    rng = np.random.default_rng(0)
    flows = [Flow(int(a), int(b)) for a, b in rng.integers(0, 32, size=(40, 2)) if a // 4 != b // 4]
    a = OPTIMISERS["annealing"](fab, flows, seed=5)
    assert a.paths == OPTIMISERS["annealing"](fab, flows, seed=5).paths
    assert a.info["steps"] == 917
    assert max_load(fab, flows, a.paths) <= max_load(fab, flows, OPTIMISERS["ecmp"](fab, flows).paths) + 1


def test_ilp_reports_optimality_and_bound():
    fab = Fabric.clos(4, 2, 4)
    flows = [Flow(12, 10), Flow(0, 15), Flow(2, 4), Flow(13, 7)]
    r = optimise("ilp", fab, flows, time_limit=10)
    assert r.info["proved_optimal"] is True and r.info["max_link_load"] == 1 == r.info["lower_bound"]
    with pytest.raises(ValueError, match="unknown optimiser"):
        optimise("nope", fab, flows)


def test_edge_colouring_is_proper_with_delta_colours():
    rng = np.random.default_rng(1)
    left = rng.integers(0, 6, size=60)
    right = rng.integers(0, 6, size=60)
    col = edge_colouring(left, right)
    delta = max(np.bincount(left).max(), np.bincount(right).max())
    assert col.max() < delta
    for side in (left, right):
        seen = set(zip(side.tolist(), col.tolist()))
        assert len(seen) == 60  # no vertex has two edges of one colour


def test_mlroute_keeps_previous_paths_when_as_good():
    fab = Fabric.clos(8, 4, 4, failed_spines=[3])
    rng = np.random.default_rng(2)
    flows = [Flow(int(a), int(b)) for a, b in rng.integers(0, 32, size=(30, 2)) if a // 4 != b // 4]
    first = OPTIMISERS["mlroute"](fab, flows)
    again = OPTIMISERS["mlroute"](fab, flows, previous=first.paths)
    assert again.changed(first.paths) == []
    # one more flow: almost every old flow keeps its path
    more = flows + [Flow(0, 31)]
    nxt = OPTIMISERS["mlroute"](fab, more, previous=first.paths + [None])
    assert len(nxt.changed(first.paths + [None])) <= 3
    assert max_load(fab, more, nxt.paths) == Problem(fab, more).degree_bound()


def test_paper_scale_mlroute_optimal_and_not_worse(paper_workload):
    flows = paper_workload(3, 4, seed=2)
    fab = Fabric.clos(64, 32, 32, failed_spines=[28, 29, 30, 31])
    m = OPTIMISERS["mlroute"](fab, flows)
    g = OPTIMISERS["greedy"](fab, flows)
    assert max_load(fab, flows, m.paths) == Problem(fab, flows).degree_bound()
    assert compare(rates(fab, flows, m.paths), rates(fab, flows, g.paths)) >= 0
    check_valid(fab, flows, m.paths)


@given(any_instance, st.sampled_from(["greedy", "ecmp"]))
def test_internal_rates_agree_with_the_metric(inst, algo):
    """The optimisers' vectorised rates (used to decide) are the metric's rates."""
    fab, flows = inst
    paths = OPTIMISERS[algo](fab, flows).paths
    prob = Problem(fab, flows)
    assert np.allclose(prob.rates(prob.choice_from_paths(paths)), rates(fab, flows, paths), rtol=1e-12)


@given(clos_instance(max_tors=8, max_spines=4, max_hosts=4, max_size=32))
def test_polish_skip_rule_is_sound(inst):
    """mlroute skips the rate polishing on uniform 2-tier fabrics with one flow per NIC and max load <= 2;
    running it anyway must find no improving move there."""
    from mlroute.routing.optimisers.mlroute import polish
    from mlroute.routing.optimisers.mlroute.budget import Budget

    fab, flows = inst
    seen_s, seen_d, uniq = set(), set(), []
    for f in flows:  # keep one flow per sending and per receiving host
        if f.src not in seen_s and f.dst not in seen_d:
            seen_s.add(f.src)
            seen_d.add(f.dst)
            uniq.append(f)
    prob = Problem(fab, uniq)
    r = OPTIMISERS["mlroute"](fab, uniq)
    choice = prob.choice_from_paths(r.paths)
    if prob.max_load(choice) > 2:
        return
    assert r.info.get("polish_skipped") or prob.max_load(choice) <= 1
    _, _, moves = polish(prob, choice, prob.rates(choice), Budget(10**9))
    assert moves == 0


@given(fattree_instance(failures=False, max_size=40))
def test_fattree_colouring_balances_every_edge_switch(inst):
    """On an intact fat-tree, level 1 of mlroute's construction gives each edge switch's uplinks (downlinks)
    at most ceil(d / (k/2)) of its d inter-edge flows: optimal for those links."""
    from mlroute.routing.optimisers.mlroute import fattree_colouring

    fab, flows = inst
    prob = Problem(fab, flows)
    choice = fattree_colouring(prob)
    if not len(prob.inter):
        assert choice is None
        return
    loads = prob.loads(choice)
    half = fab.k // 2
    d_up = np.bincount(prob.src_pos[prob.inter], minlength=len(fab.leaves))
    d_dn = np.bincount(prob.dst_pos[prob.inter], minlength=len(fab.leaves))
    for e, leaf in enumerate(fab.leaves):
        pod = leaf[4:].split("_")[0]
        for a in range(half):
            agg = f"agg{pod}_{a}"
            assert loads[fab.link_index[(leaf, agg)]] <= -(-d_up[e] // half)
            assert loads[fab.link_index[(agg, leaf)]] <= -(-d_dn[e] // half)
    check_valid(fab, flows, prob.paths(choice))


@pytest.mark.parametrize("seed", range(3))
def test_mlroute_matches_ilp_on_intact_k4_fattree(seed, fattree4):
    from mlroute.workloads.patterns import pattern_flows

    fab = fattree4
    flows = pattern_flows("random", seed=seed, fabric=fab) + pattern_flows("randbij", seed=seed + 9, fabric=fab)
    ilp = OPTIMISERS["ilp"](fab, flows, time_limit=20)
    assert ilp.info["proved_optimal"]
    assert max_load(fab, flows, OPTIMISERS["mlroute"](fab, flows).paths) == ilp.info["max_link_load"]


@given(clos_instance(max_tors=8, max_spines=5, max_hosts=4, max_size=48))
def test_repairs_meet_their_per_link_bounds(inst):
    """aligned_repair: every link <= ceil(Delta/S), and links at that load only on spines below
    r = Delta - S (ceil(Delta/S) - 1).  equitable_repair: every ToR's links <= ceil(d/S) of its own d flows.
    Both starting from the greedy, whatever it did."""
    from mlroute.routing.optimisers.greedy import greedy_choice
    from mlroute.routing.optimisers.mlroute import aligned_repair, equitable_repair

    fab, flows = inst
    prob = Problem(fab, flows)
    if not len(prob.inter):
        return
    g, _ = greedy_choice(prob)
    s = len(fab.live_spines())
    nl = len(fab.leaves)
    d_up = np.bincount(prob.src_pos[prob.inter], minlength=nl)
    d_dn = np.bincount(prob.dst_pos[prob.inter], minlength=nl)
    delta = int(max(d_up.max(), d_dn.max()))
    L = -(-delta // s)
    r = delta - s * (L - 1)
    up_i, dn_i = fab.spine_link_index()
    aligned, _ = aligned_repair(prob, g)
    loads = prob.loads(aligned)
    assert loads.max() == L == prob.degree_bound()
    for t in range(nl):
        for c in range(s):
            for link in (up_i[t, c], dn_i[t, c]):
                assert loads[link] <= L and (loads[link] < L or c < r or L == 0)
    equitable, _ = equitable_repair(prob, g)
    loads = prob.loads(equitable)
    for t in range(nl):
        assert loads[up_i[t]].max() <= -(-d_up[t] // s)
        assert loads[dn_i[t]].max() <= -(-d_dn[t] // s)


def test_metric_polishing_keeps_the_optimal_max_load():
    """Regression (found by hypothesis): three NIC-limited flows from host 2 and one from host 3.  The metric
    alone prefers all three on one spine (load 3: they are held at 1/3 by their NIC anyway, and host 3's flow
    gets a spine to itself), but mlroute must keep the optimum ceil(Delta/S) = 2."""
    fab = Fabric.clos(2, 3, 2, failed_spines=[0])
    flows = [Flow(2, 0), Flow(2, 0), Flow(2, 0), Flow(3, 1)]
    m = OPTIMISERS["mlroute"](fab, flows)
    assert max_load(fab, flows, m.paths) == 2 == Problem(fab, flows).degree_bound()
    g = OPTIMISERS["greedy"](fab, flows)
    assert compare(rates(fab, flows, m.paths), rates(fab, flows, g.paths)) >= 0


@settings(max_examples=100, deadline=None)
@given(any_instance, st.randoms(use_true_random=False))
def test_a_choice_vectors_incidences_are_those_of_its_paths(instance, rnd):
    """Problem.incidences (read from the option tables) == metric's per-path lookup, unroutable flows included."""
    from mlroute.routing.metric import _routing_csr

    fab, flows = instance
    prob = Problem(fab, flows)
    choice = prob.initial_choice()
    for i in prob.inter.tolist():
        choice[i] = rnd.randrange(-1, int(prob.n_opts[i]))
    got = prob.incidences(choice)
    want = _routing_csr(fab, flows, prob.paths(choice))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


@settings(max_examples=60, deadline=None)
@given(any_instance, st.integers(0, 2**31))
def test_the_option_rows_hold_every_option_of_every_path_set(inst, seed):
    """``Problem.option_rows`` stores each leaf's tables once: every row still reads back the set's own links,
    and the link matrix built from it is the one built from the option table."""
    fab, flows = inst
    prob = Problem(fab, flows)
    base, down, up, opts, rows, table = prob.option_rows()
    for s, ps in enumerate(prob.unique_sets):
        if len(ps) and rows[s]:
            links = np.hstack((ps.up, ps.down))
            for r in range(int(rows[s])):
                start = (base[s] if r < up[s] else down[s]) + r * opts[s]
                assert np.array_equal(table[start:start + opts[s]], links[:, r])
    choice = prob.initial_choice()
    choice[prob.inter] = np.random.default_rng(seed).integers(0, prob.n_opts[prob.inter])
    from_rows = prob.link_matrix(choice)
    prob.option_table()
    prob._mat_memo = None
    assert np.array_equal(from_rows, prob.link_matrix(choice))


@settings(max_examples=40, deadline=None)
@given(any_instance, st.integers(0, 2**31))
def test_the_links_of_the_options_of_some_flows(inst, seed):
    from mlroute.routing.optimisers.mlroute.polish import option_links_mask

    fab, flows = inst
    prob = Problem(fab, flows)
    movable = prob.inter[prob.n_opts[prob.inter] > 0]
    some = movable[np.random.default_rng(seed).random(len(movable)) < 0.5]
    want = np.zeros(prob.dummy + 1, dtype=bool)
    for f in some.tolist():
        want[prob.option_links(f)] = True
    want[prob.dummy] = False
    assert np.array_equal(option_links_mask(prob, some), want)


@settings(max_examples=40, deadline=None)
@given(clos_instance(), st.integers(0, 2**31))
def test_the_two_tier_screen_is_the_per_flow_test(inst, seed):
    """The load-vector search's screen on a uniform 2-tier fabric, computed once per pair of ToRs: for each flow,
    is some spine's max load + 1 below the largest load on its path?"""
    from mlroute.routing.optimisers.mlroute.search import _screen

    fab, flows = inst
    prob = Problem(fab, flows)
    if fab.spine_link_index() is None or not len(prob.inter):
        return
    choice = prob.initial_choice()
    choice[prob.inter] = np.random.default_rng(seed).integers(0, prob.n_opts[prob.inter])
    mat, loads = prob.link_matrix(choice), prob.loads(choice)
    cand = prob.inter
    curmax = loads[mat[cand]].max(1)
    up, dn = fab.spine_link_index()
    want = [int(np.maximum(loads[up[prob.src_pos[i]]], loads[dn[prob.dst_pos[i]]]).min()) + 1 < m
            for i, m in zip(cand.tolist(), curmax.tolist())]
    assert _screen(prob, cand, mat, loads, choice, curmax).tolist() == want
