"""mlroute experiment declares its all-reduce rings to the controller (issue 12), unless --undeclared."""

from controller import config
from controller.state import jobs
from mininet_topos.common import host_ip
from mlroute.cli import build_parser
from mlroute.experiment import runner

PATTERN = "allreduce:4x4,mb=1,iters=3"


def test_the_rings_of_a_run_are_declared_in_ring_order():
    spec = runner.ExperimentSpec("fattree", 4, patterns=[PATTERN])
    (job,) = config.parse(runner.controller_config(spec, "mlroute", PATTERN, 2))["jobs"]
    rings = runner.ring_placement(runner.parse_allreduce(PATTERN), spec.n_hosts, 2)
    assert job["rings"] == [[host_ip(int(h[1:])) for h in ring] for ring in rings]
    assert len(jobs.sends(job)) == 16  # every ring edge, routed before the first packet


def test_undeclared_runs_and_the_references_declare_nothing():
    spec = runner.ExperimentSpec("fattree", 4, patterns=[PATTERN], declare_jobs=False)
    assert config.parse(runner.controller_config(spec, "mlroute", PATTERN, 2))["jobs"] == []
    spec.declare_jobs = True
    assert config.parse(runner.controller_config(spec, runner.NONBLOCKING, PATTERN, 2))["jobs"] == []
    assert config.parse(runner.controller_config(spec, "mlroute", "stride:4", 2))["jobs"] == []


def test_the_command_line_option():
    parser = build_parser()
    assert parser.parse_args(["experiment", "--topo", "fattree", "--pattern", PATTERN, "--undeclared"]).undeclared
    assert not parser.parse_args(["experiment", "--topo", "fattree", "--pattern", PATTERN]).undeclared
