"""Shared fixtures: fabrics and workloads (routing core; others may add theirs)."""

from __future__ import annotations

import os

import pytest

from mlroute.routing.fabric import Fabric

try:  # a modest, deterministic hypothesis budget: the machine is shared
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "mlroute", max_examples=30, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    # HYPOTHESIS_PROFILE=thorough for a deeper (slower) search, e.g. before a release
    settings.register_profile("thorough", parent=settings.get_profile("mlroute"), max_examples=300)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mlroute"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def fattree4():
    """A k=4 fat-tree (16 hosts, 8 edge, 8 aggregation, 4 core switches)."""
    return Fabric.fattree(4)


@pytest.fixture
def paper_workload():
    """A factory: the paper's ring all-reduce jobs on 64 x 32 x 32, as flows (needs mlroute.workloads.jobs)."""

    def make(n_jobs=2, ring=4, seed=0):
        jobs_mod = pytest.importorskip("mlroute.workloads.jobs")
        g = jobs_mod.min_gpus_per_host(n_jobs, ring, 64, 32)
        return jobs_mod.jobs_to_flows(jobs_mod.paper_jobs(n_jobs, ring, 64, 32, seed=seed, gpus_per_host=g))

    return make


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper server (tests/zookeeper.py) for one test module; ``stop()`` / ``start()`` for outages."""
    from tests.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()
