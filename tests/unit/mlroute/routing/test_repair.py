"""The repair candidate: kept paths stay, the others are placed by the greedy's rule over the kept loads."""

import numpy as np

from mlroute.routing import metric
from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.base import Problem
from mlroute.routing.repair import repair


def test_kept_paths_stay_and_the_others_avoid_the_loaded_links():
    fab = Fabric.clos(2, 2, 4)  # hosts 0-3 on tor0, 4-7 on tor1
    flows = [Flow(0, 4), Flow(1, 5), Flow(2, 6)]
    prob = Problem(fab, flows)
    spine = [ps.paths for ps in prob.sets]
    paths = [spine[0][0], spine[1][0], spine[2][0]]  # all three on spine 0
    fixed = repair(prob, paths, [True, False, False])
    assert fixed[0] == paths[0]
    assert fixed[1] != paths[0] and fixed[2] != fixed[1]  # spine 1, then spine 0 again is as good as any
    assert metric.report(fab, flows, fixed)["max_link_load"] == 2


def test_a_repair_after_a_failure_gives_every_broken_flow_a_live_path(fattree4):
    fab = fattree4
    rng = np.random.default_rng(2)
    flows = [Flow(int(a), int(b)) for a, b in zip(rng.integers(0, 16, 40), rng.integers(0, 16, 40)) if a != b]
    paths = optimise("mlroute", fab, flows).paths
    fab.fail_link("agg0_0", "core0")
    prob = Problem(fab, flows)
    keep = [fab.is_valid_path(f, p) for f, p in zip(flows, paths)]
    fixed = repair(prob, paths, keep)
    assert not all(keep)
    assert all(fab.is_valid_path(f, p) for f, p in zip(flows, fixed))
    assert [p for p, k in zip(fixed, keep) if k] == [p for p, k in zip(paths, keep) if k]
