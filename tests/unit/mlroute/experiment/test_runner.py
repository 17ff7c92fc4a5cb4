import socket

import pytest

from mlroute.experiment import emulation, runner


def test_allreduce_spec_parsing_and_defaults():
    ar = runner.parse_allreduce("allreduce:4x4")
    assert (ar.rings, ar.size, ar.mb, ar.iterations, ar.compute_s) == (4, 4, 2.0, 5, 1.0)
    ar = runner.parse_allreduce("allreduce:2x8,mb=1.5,iters=3,compute=0.5")
    assert (ar.rings, ar.size, ar.mb, ar.iterations, ar.compute_s) == (2, 8, 1.5, 3, 0.5)


@pytest.mark.parametrize("bad", ["allreduce", "allreduce:4", "allreduce:4x1", "allreduce:2x2,speed=3"])
def test_bad_allreduce_specs_are_refused(bad):
    with pytest.raises(runner.ExperimentError):
        runner.parse_allreduce(bad)


def test_ring_placement_is_seeded_disjoint_and_bounded():
    ar = runner.parse_allreduce("allreduce:4x4")
    a = runner.ring_placement(ar, 16, seed=1)
    assert a == runner.ring_placement(ar, 16, seed=1) != runner.ring_placement(ar, 16, seed=2)
    members = [h for ring in a for h in ring]
    assert len(members) == len(set(members)) == 16
    with pytest.raises(runner.ExperimentError, match="need 20 hosts"):
        runner.ring_placement(runner.parse_allreduce("allreduce:5x4"), 16, 0)


def test_spec_validation_names_the_problem():
    spec = runner.ExperimentSpec("fattree", patterns=["stride:4"], modes=["ecmp", "teleport"])
    with pytest.raises(runner.ExperimentError, match="unknown mode 'teleport'"):
        runner.validate(spec)
    with pytest.raises(runner.ExperimentError, match="duration"):
        runner.validate(runner.ExperimentSpec("fattree", duration=2))
    runner.validate(runner.ExperimentSpec("leafspine", patterns=["randbij", "allreduce:2x4"]))


def test_fabric_sizes():
    assert runner.ExperimentSpec("fattree", k=4).n_hosts == 16
    spec = runner.ExperimentSpec("leafspine", leaves=4, hosts_per_leaf=2)
    assert (spec.n_hosts, spec.hosts_per_edge) == (8, 2)


def test_sflow_detection_configures_the_controller_and_validates():
    from controller import config
    spec = runner.ExperimentSpec("fattree", detection="sflow", sampling=256)
    parsed = config.parse(runner.controller_config(spec, "mlroute", sflow_port=16343))
    assert parsed["te"]["detection"] == "sflow" and parsed["sflow"]["port"] == 16343
    assert config.parse(runner.controller_config(spec, "mlroute"))["te"]["detection"] == "flowstats"  # no port
    with pytest.raises(runner.ExperimentError, match="--sampling"):
        runner.validate(runner.ExperimentSpec("fattree", detection="sflow", sampling=0))
    with pytest.raises(runner.ExperimentError, match="--detection"):
        runner.validate(runner.ExperimentSpec("fattree", detection="netflow"))


# --- mode external: the runs on controllers already running (--controllers; issue 22, item 2) ---

def test_controller_lists_parse_and_refuse_by_name():
    a, b = runner.parse_controllers("127.0.0.1:6654/8081,ctl-b:6655")
    assert (str(a), str(b), b.rest_port) == ("127.0.0.1:6654/8081", "ctl-b:6655", None)
    for bad, named in [("127.0.0.1:6654,ctl-b", "'ctl-b'"), ("127.0.0.1:6654,", "''"), ("x:1/2/3", "'x:1/2/3'")]:
        with pytest.raises(runner.ExperimentError, match=f"bad controller address {named}"):
            runner.parse_controllers(bad)
    with pytest.raises(runner.ExperimentError, match="127.0.0.1:6654 is given twice"):
        runner.parse_controllers("127.0.0.1:6654/8081,127.0.0.1:6654/8082")


def _external(**kw):
    return runner.ExperimentSpec("leafspine", 4, 2, 2, 2, ["stride:2"], controllers=runner.parse_controllers(
        "127.0.0.1:6654/8081,127.0.0.1:6655/8082"), **kw)


def test_external_modes_are_validated():
    runner.validate(_external(modes=["external", "nonblocking"]))
    runner.validate(_external(modes=["external"]))
    with pytest.raises(runner.ExperimentError, match="takes external and nonblocking.*got external,ecmp"):
        runner.validate(_external(modes=["external", "ecmp"]))
    with pytest.raises(runner.ExperimentError, match="needs external"):
        runner.validate(_external(modes=["nonblocking"]))
    with pytest.raises(runner.ExperimentError, match="--detection"):
        runner.validate(_external(modes=["external"], detection="sflow"))
    with pytest.raises(runner.ExperimentError, match="mode 'external' needs --controllers"):
        runner.validate(runner.ExperimentSpec("leafspine", modes=["external", "nonblocking"]))


def test_an_external_controller_that_is_not_there_is_refused_by_name():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        runner.check_controllers(runner.parse_controllers(f"127.0.0.1:{port}"))  # OpenFlow only: connects
        closed = emulation.free_port()
        with pytest.raises(runner.ExperimentError, match=f"127.0.0.1:{closed}: nothing accepts OpenFlow"):
            runner.check_controllers(runner.parse_controllers(f"127.0.0.1:{port},127.0.0.1:{closed}"))
        with pytest.raises(runner.ExperimentError, match=f"its REST at 127.0.0.1:{closed} does not answer"):
            runner.check_controllers(runner.parse_controllers(f"127.0.0.1:{port}/{closed}"))


class FakeNode:
    """An external controller's REST: its role, elephants and counters (mutable, as a running one's are)."""

    def __init__(self, role, elephants=0, moved=0.0, reoptimisations=0.0):
        self.role, self.elephants = role, elephants
        self.counters = {"mlroute_flows_moved_total": moved, "mlroute_reoptimisations_total": reoptimisations}

    def answer(self, path):
        if self.role is None:
            raise ConnectionRefusedError(path)
        return {"/mlroute/cluster": {"enabled": True, "role": self.role},
                "/mlroute/elephants": [{}] * self.elephants}[path]


@pytest.fixture
def nodes(monkeypatch):
    """port -> FakeNode, answering ExternalController.get / metric for that REST port (no network)."""
    table = {}
    monkeypatch.setattr(emulation.ExternalController, "get", lambda self, path: table[self.rest_port].answer(path))
    monkeypatch.setattr(emulation.ExternalController, "metric", lambda self, name: table[self.rest_port].counters[name])
    return table


def test_the_leader_is_the_node_whose_rest_says_so(nodes):
    ctls = runner.parse_controllers("127.0.0.1:6654,127.0.0.1:6655/8082,127.0.0.1:6656/8083")
    nodes.update({8082: FakeNode("follower"), 8083: FakeNode("leader")})
    assert runner.leading(ctls) is ctls[2]
    nodes[8083].role = None  # the leader died: no answer, an election under way
    assert runner.leading(ctls) is None
    nodes[8082].role = "leader"
    assert runner.leading(ctls) is ctls[1]
    nodes[8082].role = "standalone"  # one controller, no cluster: section
    assert runner.leading(ctls[1:2]) is ctls[1]
    assert runner.leading(ctls[:1]) is None  # no REST port: nobody to ask


def test_external_runs_use_the_running_controllers_and_leave_them_running(nodes, monkeypatch, tmp_path):
    """The network connects to every address; results are the leader's, its counters counted from the start
    of the run's traffic; no controller is started or stopped."""
    spec = _external(modes=["external"], duration=8)
    nodes.update({8081: FakeNode("follower"), 8082: FakeNode("leader", moved=5, reoptimisations=7)})
    started = []

    def no_controller(*args, **kwargs):
        raise AssertionError("an external run started a controller")

    def traffic(spec_, pattern, seed, net):
        nodes[8082].elephants, nodes[8082].counters["mlroute_flows_moved_total"] = 4, 8
        return {"aggregate_mbps": 30.0, "flows": []}
    monkeypatch.setattr(emulation, "Controller", no_controller)
    monkeypatch.setattr(emulation, "start_network", lambda topo, ctls, jumbo: started.append(ctls) or "net")
    monkeypatch.setattr(emulation, "ping_all", lambda net: 0)
    monkeypatch.setattr(emulation, "stop_network", lambda net: started.append(("stopped", net)))
    monkeypatch.setattr(runner, "_run_iperf", traffic)
    result = runner.run_one(spec, "stride:2", "external", 1, tmp_path)
    assert started == [spec.controllers, ("stopped", "net")]
    assert result == {"pattern": "stride:2", "mode": "external", "seed": 1, "aggregate_mbps": 30.0, "flows": [],
                      "elephants": 4, "leader": "127.0.0.1:6655/8082", "flows_moved": 3, "reoptimisations": 0}

    def takeover(spec_, pattern, seed, net):  # the leader changed during the run: its counters say nothing
        nodes[8082].role, nodes[8081].role, nodes[8081].elephants = "follower", "leader", 2
        return {"aggregate_mbps": 30.0, "flows": []}
    monkeypatch.setattr(runner, "_run_iperf", takeover)
    result = runner.run_one(spec, "stride:2", "external", 1, tmp_path)
    assert (result["elephants"], result["leader"]) == (2, "127.0.0.1:6654/8081") and "flows_moved" not in result

    def no_leader(spec_, pattern, seed, net):
        nodes[8081].role = None
        return {"aggregate_mbps": 30.0, "flows": []}
    monkeypatch.setattr(runner, "_run_iperf", no_leader)
    result = runner.run_one(spec, "stride:2", "external", 1, tmp_path)
    assert not {"elephants", "leader", "flows_moved", "reoptimisations"} & set(result)
