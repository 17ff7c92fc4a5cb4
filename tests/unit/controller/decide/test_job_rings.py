"""controller/decide/job_rings.py beyond the REST calls: what a choice is routed with besides the job."""

from collections import namedtuple

from controller.decide.job_rings import other_flows
from mlroute.routing.fabric import Fabric

Key = namedtuple("Key", "src_ip dst_ip")


def test_the_other_jobs_sends_and_the_uncovered_elephants_count_but_not_the_jobs_own_or_off_fabric_ones():
    fab = Fabric.from_graph(Fabric.fattree(4).graph, {f"10.0.0.{h + 1}": Fabric.fattree(4).hosts[h] for h in range(16)})
    jobs = [{"name": "me", "hosts": ["10.0.0.1", "10.0.0.5"]},
            {"name": "b", "hosts": ["10.0.0.2", "10.0.0.6"], "rings": [["10.0.0.2", "10.0.0.6"]], "weight": 2.0}]
    elephants = [Key("10.0.0.2", "10.0.0.6"),  # b's declared send: counted once, as b's
                 Key("10.0.0.1", "10.0.0.5"),  # between two of the job's own hosts: the job's old ring
                 Key("10.0.0.3", "10.0.0.7"),  # someone else's elephant
                 Key("10.0.0.3", "10.9.9.9")]  # off the fabric
    flows = other_flows("me", jobs, elephants, {"10.0.0.1", "10.0.0.5"}, fab)
    assert [(f.src, f.dst, f.job, f.weight) for f in flows] == [
        ("10.0.0.2", "10.0.0.6", "b", 2.0), ("10.0.0.6", "10.0.0.2", "b", 2.0), ("10.0.0.3", "10.0.0.7", None, 1.0)]
