"""mlroute's search budget is counted in work: the same routing whatever the machine's load (issue 33)."""

import multiprocessing
import time

import numpy as np

from mlroute.routing.fabric import Fabric
from mlroute.routing.flow import Flow
from mlroute.routing.optimisers import optimise
from mlroute.routing.optimisers.mlroute.budget import Budget, work_for
from mlroute.workloads.jobs import jobs_to_flows, min_gpus_per_host, paper_jobs


def _busy(stop):
    while not stop.is_set():
        pass


def _instance():
    """2,000 random flows on a k=8 fat-tree: the polishing has more to do than the work budget allows."""
    fab = Fabric.fattree(8)
    rng = np.random.default_rng(5)
    hosts = sorted(fab.hosts)
    return fab, [Flow(hosts[a], hosts[b]) for a, b in zip(rng.integers(0, len(hosts), 2000),
                                                           rng.integers(0, len(hosts), 2000)) if a != b]


def _paper_cell():
    """The quick grid's random-placement cell 5 jobs x ring 8, 4 failed spines (2,816 flows): its search takes
    2-5x the construction's time, so the old time budget cut it at a point that moved with the load (3 of 3 runs
    with two CPU hogs gave another routing than the quiet run before this budget)."""
    gph = min_gpus_per_host(5, 8, 64, 32, placement="random")
    jobs = paper_jobs(5, 8, 64, 32, seed=509, iterations=1, gpus_per_host=gph, placement="random")
    return Fabric.clos(64, 32, 32, failed_spines=range(28, 32)), jobs_to_flows(jobs)


def test_the_default_routing_is_the_same_with_cpu_hogs_running_beside_it():
    fab, flows = _paper_cell()
    quiet = optimise("mlroute", fab, flows)
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(2)]
    for h in hogs:
        h.start()
    try:
        time.sleep(0.2)  # the hogs are running before the search starts
        loaded = optimise("mlroute", fab, flows)
    finally:
        stop.set()
        for h in hogs:
            h.join(5)
    assert loaded.paths == quiet.paths
    assert not quiet.info["cut_by_clock"] and not loaded.info["cut_by_clock"]
    assert quiet.info["bottleneck_moves"] > 200  # a long search: the old time budget cut it
    assert loaded.info["work"] == quiet.info["work"]


def test_where_the_work_budget_runs_out_it_decides_the_same_way_every_time():
    fab, flows = _instance()
    first, again = optimise("mlroute", fab, flows), optimise("mlroute", fab, flows)
    assert not first.info["search_complete"] and not first.info["cut_by_clock"]  # stopped by the work budget
    assert first.paths == again.paths and first.info["work"] == again.info["work"]


def test_the_work_budget_grows_with_the_instance_within_its_bounds():
    assert work_for(0) == work_for(10) > 0
    assert work_for(10**6) > work_for(10**5)
    assert work_for(10**9) == work_for(10**10)


def test_the_budget_stops_on_work_and_the_clock_only_as_a_safety_net(caplog):
    now = [0.0]
    b = Budget(10, clock_s=5.0, clock=lambda: now[0])
    assert b.charge(9) and b.complete
    assert not b.charge(1) and b.cut_by_work and not b.cut_by_clock
    b = Budget(10**9, clock_s=5.0, clock=lambda: now[0])
    assert b.left()
    now[0] = 6.0
    b.charge(10**6)  # past the point where the clock is read again
    assert not b.left() and b.cut_by_clock and not b.complete
    assert "safety net" in caplog.text


def test_a_search_the_clock_cuts_short_says_so():
    fab, flows = _instance()
    info = optimise("mlroute", fab, flows, time_limit=0.0).info
    assert info["cut_by_clock"] and not info["search_complete"] and not info["fixpoint"]
    assert optimise("annealing", fab, flows[:200], time_limit=0.0).info["cut_by_clock"]
    assert not optimise("annealing", fab, flows[:200]).info["cut_by_clock"]
