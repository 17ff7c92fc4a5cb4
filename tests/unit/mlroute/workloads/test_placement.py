"""Ring choice's placements: pairs of pods / ToRs, rank order contiguous or interleaved, or a seeded random draw."""

import numpy as np
import pytest

from mlroute.routing.fabric import Fabric
from mlroute.workloads.jobs import WorkloadError, min_gpus_per_host, paper_jobs
from mlroute.workloads.placement import PlacementError, host_groups, place_replicas

PODS = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]  # a k=4 fat-tree's pods


def flat(placed):
    return [[h for rep in reps for h in rep] for reps in placed]


def test_host_groups_are_pods_of_a_fattree_and_tors_of_a_clos():
    assert host_groups(Fabric.fattree(4)) == PODS
    assert host_groups(Fabric.clos(3, 2, 2)) == [[0, 1], [2, 3], [4, 5]]


def test_contiguous_and_interleaved_fill_pairs_of_groups_in_order():
    needs = [(4, 1)] * 4
    assert flat(place_replicas(PODS, needs, "contiguous")) == [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13],
                                                                [10, 11, 14, 15]]
    assert flat(place_replicas(PODS, needs, "interleaved")) == [[0, 4, 1, 5], [2, 6, 3, 7], [8, 12, 9, 13],
                                                                 [10, 14, 11, 15]]
    # replicas of two hosts, an odd ring: A, B, A (interleaved) / A, A, B (contiguous)
    assert place_replicas(PODS, [(3, 2)], "interleaved") == [[[0, 1], [4, 5], [2, 3]]]
    assert place_replicas(PODS, [(3, 2)], "contiguous") == [[[0, 1], [2, 3], [4, 5]]]


def test_random_is_one_seeded_permutation():
    perm = np.random.default_rng(5).permutation(16).tolist()
    assert flat(place_replicas(PODS, [(4, 1)] * 4, "random", np.random.default_rng(5))) == \
        [perm[i:i + 4] for i in range(0, 16, 4)]


def test_what_does_not_fit_is_an_error():
    with pytest.raises(PlacementError, match="does not fit"):
        place_replicas(PODS, [(4, 1)] * 5, "interleaved")
    with pytest.raises(PlacementError, match="does not fit"):
        place_replicas(PODS, [(4, 1)] * 5, "random", np.random.default_rng(0))
    with pytest.raises(PlacementError, match="placement"):
        place_replicas(PODS, [(4, 1)], "packed")
    with pytest.raises(WorkloadError, match="does not fit"):  # as paper_jobs says it
        paper_jobs(5, 4, tors=8, hosts_per_tor=2, models=("gpt3",), gpus_per_host=64, placement="interleaved",
                   groups=PODS)


def test_paper_jobs_take_the_paired_placements():
    jobs = paper_jobs(4, 4, tors=8, hosts_per_tor=2, seed=1, models=("gpt3",), gpus_per_host=64,
                      placement="interleaved", groups=PODS, iterations=1)
    assert [j.rings[0] for j in jobs] == [[0, 4, 1, 5], [2, 6, 3, 7], [8, 12, 9, 13], [10, 14, 11, 15]]
    assert all(r == j.rings[0] for j in jobs for r in j.rings) and len(jobs[0].rings) == 64
    assert jobs[0].host_tor == {0: 0, 4: 2, 1: 0, 5: 2}
    # the same start times as the paper's placement: only the hosts differ
    tor = paper_jobs(1, 2, tors=8, hosts_per_tor=2, seed=1, models=("gpt3",), gpus_per_host=64, iterations=1)
    assert jobs[0].start_s == tor[0].start_s
    assert min_gpus_per_host(4, 4, 8, 2, ("gpt3",), placement="contiguous", groups=PODS) == 64
