import pytest

from mlroute.experiment import runner


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
