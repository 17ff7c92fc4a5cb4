"""The ovs-vsctl calls that start and stop the sFlow export (mininet_topos/common.py, used by mininet_topos/
sflow.py and mlroute experiment): one shared record for every bridge, and a clear per bridge."""

from mininet_topos.common import sflow_clear_command, sflow_command


def test_one_record_is_shared_by_every_bridge():
    args = sflow_command(["s1", "s2"], "127.0.0.1:7000", sampling=256, polling=1)
    assert args[:4] == ["ovs-vsctl", "--", "--id=@s", "create"]
    assert {"agent=lo", 'target="127.0.0.1:7000"', "sampling=256", "polling=1", "header=128"} <= set(args)
    assert " ".join(args).endswith("-- set bridge s1 sflow=@s -- set bridge s2 sflow=@s")


def test_clearing_names_each_bridge_and_tolerates_a_gone_one():
    assert sflow_clear_command(["s1", "s2"]) == ["ovs-vsctl", "--", "--if-exists", "clear", "bridge", "s1", "sflow",
                                                 "--", "--if-exists", "clear", "bridge", "s2", "sflow"]
