"""Job names and bodies from the launcher's environment."""

from __future__ import annotations

from mlroute.torch import job


def test_name_from_mlroute_job_then_run_id_then_the_rendezvous_address():
    assert job.base_name({"MLROUTE_JOB": "bert large", "TORCHELASTIC_RUN_ID": "r1"}) == "bert-large"
    assert job.base_name({"TORCHELASTIC_RUN_ID": "8a3f-2c"}) == "8a3f-2c"
    # torchrun's static rendezvous calls every job "none": two jobs must not replace each other's rings
    env = {"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}
    assert job.base_name(env) == "torch-10.0.0.5-29500"
    assert job.base_name({"TORCHELASTIC_RUN_ID": "none"}) is None
    assert job.clean("a/b?c") == "a-b-c" and job.clean("///") == "job"


def test_sub_groups_get_a_stable_suffix_the_default_group_keeps_the_name():
    assert job.group_name("j", [0, 1, 2, 3], 4) == "j"
    sub = job.group_name("j", [0, 2], 4)
    assert sub.startswith("j-g") and sub == job.group_name("j", [0, 2], 4) != job.group_name("j", [1, 3], 4)


def test_lease_and_body():
    assert job.lease_seconds({}) == 30.0 and job.lease_seconds({"MLROUTE_LEASE_S": "9"}) == 9.0
    assert job.lease_seconds({"MLROUTE_LEASE_S": "x"}) == 30.0 and job.lease_seconds({"MLROUTE_LEASE_S": "-1"}) == 30.0
    hosts = ["a", "a", "b"]
    assert job.body(hosts, [["b", "a"]], {}) == {"hosts": ["a", "b"], "rings": [["b", "a"]]}
    assert job.body(hosts, [["b", "a"]], {"MLROUTE_WEIGHT": "2.5"})["weight"] == 2.5
