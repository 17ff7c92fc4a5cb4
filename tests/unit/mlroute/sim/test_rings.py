"""Ring choice in the simulator: a k=4 fat-tree, rank order against the chosen rings."""

import numpy as np
import pytest

from mlroute.sim.engine import simulate
from mlroute.sim.rings import choose_job_rings
from mlroute.workloads.jobs import Job
from mlroute.workloads.placement import host_groups, place_replicas
from tests.unit.mlroute.routing.test_ring_choice import fattree

S = 1e9  # bytes per ring step


def ring_jobs(fab, placement, rings=1):
    """4 jobs x 4 hosts, one ring each (or ``rings`` over the same hosts), all starting at once."""
    placed = place_replicas(host_groups(fab), [(4, 1)] * 4, placement, np.random.default_rng(1))
    tor = {h: fab.leaves.index(leaf) for h, leaf in fab.hosts.items()}
    return [Job(f"j{i}", "allreduce", [[h for rep in reps for h in rep]] * rings, S, 0.0, 0.0, 2,
                {rep[0]: tor[rep[0]] for rep in reps}) for i, reps in enumerate(placed)]


def relative(fab, jobs):
    res = simulate(fab, jobs, "mlroute", link_bps=100e9, seed=1, mode="events")
    return np.array([max(it["allreduce_s"] for it in j.iterations) / j.ideal_s for j in res.jobs])


def test_interleaved_rings_with_a_core_link_down_run_at_the_ideal_when_chosen():
    fab = fattree(("agg0_0", "core0"))
    jobs = ring_jobs(fab, "interleaved")
    chosen, rows = choose_job_rings(fab, jobs, seed=1)
    given = relative(fab, jobs)
    assert given.max() == pytest.approx(2.0, rel=1e-6)  # 4 flows leave pod 0 on 3 cables: one shares
    assert relative(fab, chosen) == pytest.approx(np.ones(4), rel=1e-6)
    assert [r["job"] for r in rows] == ["j0", "j1", "j2", "j3"] and sum(r["helps"] for r in rows) >= 1
    for job, c, r in zip(chosen, jobs, rows):
        # rings send member i -> i+1 in the simulator: the chosen order is the ring as run
        assert job.rings == [r["order"]] and sorted(job.rings[0]) == sorted(c.rings[0])
        assert r["helps"] == (job.rings != c.rings)


def test_contiguous_rings_are_left_alone():
    fab = fattree(("agg0_0", "core0"), ("agg2_1", "core2"))
    jobs = ring_jobs(fab, "contiguous")
    chosen, rows = choose_job_rings(fab, jobs, seed=1)
    assert not any(r["helps"] for r in rows)
    assert [j.rings for j in chosen] == [j.rings for j in jobs]
    assert relative(fab, jobs) == pytest.approx(np.ones(4), rel=1e-6)


def test_rings_over_the_same_hosts_follow_one_order_and_pipelines_are_other_traffic():
    fab = fattree(("agg0_0", "core0"))
    jobs = ring_jobs(fab, "interleaved", rings=3)
    pipe = Job("p", "pipeline", [[8, 12]], S, 0.0, 0.0, 1, {8: 4, 12: 6})
    chosen, rows = choose_job_rings(fab, [*jobs[:2], pipe], seed=1)
    assert [r["rings"] for r in rows] == [3, 3]  # one choice per distinct ring, standing for its 3 copies
    assert all(len({tuple(r) for r in j.rings}) == 1 for j in chosen)
    assert chosen[2] is pipe
    assert relative(fab, chosen[:2]) == pytest.approx(np.ones(2), rel=1e-6)
