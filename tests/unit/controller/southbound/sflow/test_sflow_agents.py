from controller.southbound.sflow.agents import AgentMap, sysfs_ifindex
from controller.southbound.sflow.decoder import decode
from tests import sflow_datagrams as enc


def ovs_counters(ifindex, dpid, port, name, sub_agent=0, agent="127.0.0.1", with_of_port=True):
    """A counter datagram as Open vSwitch 3.1 sends it for one port (generic, ethernet, name, OpenFlow port)."""
    records = [enc.if_counters_record(if_index=ifindex), enc.ethernet_counters_record(), enc.port_name_record(name)]
    if with_of_port:
        records.append(enc.openflow_port_record(dpid, port))
    return decode(enc.datagram([enc.counter_sample(records, source_index=ifindex)], agent=agent, sub_agent=sub_agent))


def flow_datagram(input_value, output_value, sub_agent=0, agent="127.0.0.1", output_format=0):
    sample = enc.flow_sample([enc.header_record(enc.ethernet_frame())], source_type=2, source_index=1000 + sub_agent,
                             input_value=input_value, output_value=output_value, output_format=output_format)
    d = decode(enc.datagram([sample], agent=agent, sub_agent=sub_agent))
    return d, d.flow_samples[0]


def test_learned_from_open_vswitch_counter_samples():
    agents = AgentMap()
    assert agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1")) == 1
    assert agents.learn(ovs_counters(6, 0xA1, 2, "s1-eth2")) == 1
    assert agents.learn(ovs_counters(5, 0xA2, 1, "s2-eth1", sub_agent=1)) == 1
    assert agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1")) == 0  # known already
    d, s = flow_datagram(8, 6)
    assert agents.input_port(d, s) == (0xA1, 1) and agents.output_port(d, s) == (0xA1, 2)
    d, s = flow_datagram(5, 6, sub_agent=1)
    assert agents.input_port(d, s) == (0xA2, 1)
    assert agents.switch_of("127.0.0.1", 0) == 0xA1 and agents.switch_of("127.0.0.1", 1) == 0xA2
    assert agents.knows_agent("127.0.0.1") and len(agents) == 3


def test_sub_agent_renumbering_keeps_the_ports():
    """Open vSwitch numbers sub-agents by bridge order: a bridge added before s1 shifts it, its ifindexes stay."""
    agents = AgentMap()
    agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1", sub_agent=0))
    agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1", sub_agent=3))
    d, s = flow_datagram(8, 0, sub_agent=3)
    assert agents.input_port(d, s) == (0xA1, 1) and agents.switch_of("127.0.0.1", 3) == 0xA1


def test_unknown_agent_interface_flood_and_missing_record():
    agents = AgentMap()
    agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1"))
    assert agents.learn(ovs_counters(9, 0xA1, 3, "s1-eth3", with_of_port=False)) == 0
    d, s = flow_datagram(9, 2, output_format=2)  # unknown input; flooded to 2 ports
    assert agents.input_port(d, s) is None and agents.output_port(d, s) is None
    d, s = flow_datagram(8, 6, agent="10.1.1.1")
    assert agents.input_port(d, s) is None and not agents.knows_agent("10.1.1.1")
    assert agents.port_of("127.0.0.1", 0, None) is None


def test_configured_table_and_sub_agent_specific_entries():
    agents = AgentMap()
    assert agents.add("192.0.2.1", 3, 7, 1)
    assert agents.add("192.0.2.1", 3, 8, 1, sub_agent_id=2)  # a chassis whose line cards are sub-agents
    assert agents.port_of("192.0.2.1", 2, 3) == (8, 1) and agents.port_of("192.0.2.1", 0, 3) == (7, 1)


def test_accept_and_size_bound_refuse_forged_entries():
    agents = AgentMap(accept=lambda dpid, port: dpid == 0xA1, max_entries=2)
    assert agents.learn(ovs_counters(30, 0xBAD, 1, "x")) == 0
    assert agents.learn(ovs_counters(8, 0xA1, 1, "a")) == 1
    assert agents.learn(ovs_counters(6, 0xA1, 2, "b")) == 1
    assert agents.learn(ovs_counters(7, 0xA1, 3, "c")) == 0
    assert len(agents) == 2 and agents.refused == 2


def test_port_names_through_ifindex_lookup(tmp_path):
    for name, index in (("s1-eth1", 8), ("s1-eth2", 6)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ifindex").write_text(f"{index}\n")
    lookup = lambda name: sysfs_ifindex(name, root=str(tmp_path))  # noqa: E731
    agents = AgentMap()
    assert agents.add_port_names("127.0.0.1", 0xA1, {1: "s1-eth1", 2: "s1-eth2", 3: "gone"}, lookup) == 2
    assert agents.port_of("127.0.0.1", 5, 6) == (0xA1, 2)
    assert sysfs_ifindex("../etc", root=str(tmp_path)) is None and sysfs_ifindex("lo") == 1


def test_forget_switch():
    agents = AgentMap()
    agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1"))
    agents.learn(ovs_counters(5, 0xA2, 1, "s2-eth1", sub_agent=1))
    assert agents.forget_switch(0xA1) == 1
    assert agents.port_of("127.0.0.1", 0, 8) is None and agents.port_of("127.0.0.1", 1, 5) == (0xA2, 1)
    assert agents.switch_of("127.0.0.1", 0) is None
    agents.forget_switch(0xA2)
    assert not agents.knows_agent("127.0.0.1")


def test_mapped_ports_per_switch():
    agents = AgentMap()
    agents.learn(ovs_counters(8, 0xA1, 1, "s1-eth1"))
    agents.learn(ovs_counters(6, 0xA1, 2, "s1-eth2"))
    agents.add("127.0.0.1", 8, 0xA1, 1, sub_agent_id=3)  # a second entry naming the same port
    assert agents.mapped(0xA1) == {1, 2} and agents.mapped(0xA2) == set()
    agents.learn(ovs_counters(6, 0xA2, 1, "s2-eth1"))  # ifindex 6 renumbered to another bridge's port
    assert agents.mapped(0xA1) == {1} and agents.mapped(0xA2) == {1}
    agents.forget_switch(0xA1)
    assert agents.mapped(0xA1) == set() and agents.mapped(0xA2) == {1}
