"""Which switch port an sFlow sample speaks of: (agent address, sub-agent id, ifIndex) -> (DPID, OpenFlow port).

sFlow names interfaces by SNMP ifIndex, OpenFlow by port number, so the controller needs a table between the two.
What Open vSwitch 3.1 exports (measured, tests/integration/test_sflow_export.py):

- agent address: the IPv4 address of the ``agent=`` interface of the sFlow record (``agent=lo`` gives 127.0.0.1);
  one vswitchd is one agent for all its bridges.
- sub-agent id: the bridge's position among the bridges that have sFlow (0, 1, ... in ovs-vswitchd's order): it
  tells bridges apart but is not stable across reconfigurations, so it is not part of the key by default.
- ifIndex: the kernel ifindex of the port's network device (``ovs-vsctl get Interface NAME ifindex``, or
  /sys/class/net/NAME/ifindex): unique per host, so (agent, ifIndex) names one port of one bridge. Flow samples
  give the input and output ifIndex (output format 2 "multiple" for a flood); their source is the bridge
  (type 2, index 1000 + sub-agent id).
- every counter sample carries, besides the generic interface counters, Open vSwitch's OpenFlow-port record
  (DPID, OpenFlow port) and the port name: so the table is **learned from the counter samples themselves**, one
  polling interval after sFlow is switched on. Where a switch does not send that record, ``add`` (a configured
  table) or ``add_port_names`` (the port names of the switch's port descriptions -> ifindex) fill it.

Learning can be limited to ports the controller knows (``accept``), and the table has a size bound, so forged
counter samples cannot grow it without end. Unknown agent or interface -> None: the caller drops and counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from controller.southbound.sflow.decoder import CounterSample, Datagram, FlowSample

PortRef = tuple[int, int]  # (dpid, OpenFlow port)
ANY_SUB_AGENT = -1  # an entry that matches whatever sub-agent id the agent sends
MAX_ENTRIES = 65536


def sysfs_ifindex(name: str, root: str = "/sys/class/net") -> int | None:
    """The kernel ifindex of network device ``name`` on this host (None if it has none): valid when the controller
    shares the network namespace of the switch's ports, as with Mininet and Open vSwitch on one machine."""
    if not name or "/" in name or name.startswith("."):
        return None
    try:
        return int(Path(root, name, "ifindex").read_text().strip())
    except (OSError, ValueError):
        return None


class AgentMap:
    """The (agent, sub-agent, ifIndex) -> (DPID, port) table, configured and learned."""

    def __init__(self, accept: Callable[[int, int], bool] | None = None, max_entries: int = MAX_ENTRIES,
                 match_sub_agent: bool = False):
        self._ports: dict[tuple[str, int, int], PortRef] = {}
        self._switch: dict[tuple[str, int], int] = {}  # (agent, sub-agent) -> dpid, learned from counter samples
        self._agents: dict[str, int] = {}  # agent -> number of entries
        self._mapped: dict[int, dict[int, int]] = {}  # dpid -> port -> entries naming it (who is covered)
        self.accept = accept
        self.max_entries = max_entries
        self.match_sub_agent = match_sub_agent  # key learned entries by sub-agent id too (switches that keep it)
        self.refused = 0  # learning attempts refused: port not accepted, or the table full

    def __len__(self) -> int:
        return len(self._ports)

    def add(self, agent: str, ifindex: int, dpid: int, port: int, sub_agent_id: int = ANY_SUB_AGENT) -> bool:
        """One entry; False (and counted in ``refused``) when the table is full or the port not accepted."""
        key = (agent, sub_agent_id, ifindex)
        if key not in self._ports and len(self._ports) >= self.max_entries:
            self.refused += 1
            return False
        if self.accept is not None and not self.accept(dpid, port):
            self.refused += 1
            return False
        old = self._ports.get(key)
        if old is None:
            self._agents[agent] = self._agents.get(agent, 0) + 1
        elif old != (dpid, port):
            self._unmap(old)
        if old != (dpid, port):
            ports = self._mapped.setdefault(dpid, {})
            ports[port] = ports.get(port, 0) + 1
        self._ports[key] = (dpid, port)
        return True

    def _unmap(self, ref: PortRef) -> None:
        ports = self._mapped.get(ref[0], {})
        ports[ref[1]] = ports.get(ref[1], 1) - 1
        if ports[ref[1]] <= 0:
            del ports[ref[1]]
        if not ports:
            self._mapped.pop(ref[0], None)

    def add_port_names(self, agent: str, dpid: int, ports: Mapping[int, str],
                       ifindex_of: Callable[[str], int | None] = sysfs_ifindex) -> int:
        """Entries for a switch from its ports' names (OpenFlow port -> name), each name's ifindex found by
        ``ifindex_of``; returns how many were added."""
        added = 0
        for port, name in ports.items():
            ifindex = ifindex_of(name)
            if ifindex is not None and ifindex > 0 and self.add(agent, ifindex, dpid, port):
                added += 1
        return added

    def learn(self, datagram: Datagram) -> int:
        """Entries from the datagram's counter samples that carry an OpenFlow-port record; returns how many."""
        learned = 0
        for sample in datagram.counter_samples:
            if self._learn_one(datagram.agent, datagram.sub_agent_id, sample):
                learned += 1
        return learned

    def _learn_one(self, agent: str, sub_agent_id: int, sample: CounterSample) -> bool:
        if sample.openflow_port is None:
            return False
        if sample.interface is not None:
            ifindex = sample.interface.if_index
        elif sample.source_type == 0:
            ifindex = sample.source_index
        else:
            return False
        if ifindex <= 0:
            return False
        dpid, port = sample.openflow_port
        sub = sub_agent_id if self.match_sub_agent else ANY_SUB_AGENT
        known = self._ports.get((agent, sub, ifindex)) == (dpid, port)  # the usual case, every polling interval
        if not known and not self.add(agent, ifindex, dpid, port, sub):
            return False
        if (agent, sub_agent_id) in self._switch or len(self._switch) < self.max_entries:
            self._switch[(agent, sub_agent_id)] = dpid
        return not known

    def port_of(self, agent: str, sub_agent_id: int, ifindex: int | None) -> PortRef | None:
        """The (dpid, port) of an interface; an entry for this sub-agent wins over one for any sub-agent."""
        if ifindex is None:
            return None
        return self._ports.get((agent, sub_agent_id, ifindex)) or self._ports.get((agent, ANY_SUB_AGENT, ifindex))

    def input_port(self, datagram: Datagram, sample: FlowSample) -> PortRef | None:
        """Where the sampled packet entered the switch."""
        return self.port_of(datagram.agent, datagram.sub_agent_id, sample.input_ifindex)

    def output_port(self, datagram: Datagram, sample: FlowSample) -> PortRef | None:
        """Where it left; None for a flood, a drop or an interface not in the table."""
        return self.port_of(datagram.agent, datagram.sub_agent_id, sample.output_ifindex)

    def switch_of(self, agent: str, sub_agent_id: int) -> int | None:
        """The DPID behind an (agent, sub-agent), once one of its counter samples has been learned."""
        return self._switch.get((agent, sub_agent_id))

    def mapped(self, dpid: int) -> set[int]:
        """The OpenFlow ports of ``dpid`` some entry names (samples from them can be placed)."""
        return set(self._mapped.get(dpid, ()))

    def knows_agent(self, agent: str) -> bool:
        return agent in self._agents

    def forget_switch(self, dpid: int) -> int:
        """Drop a switch's entries (it left, or its ports were renumbered); returns how many."""
        gone = [k for k, (d, _) in self._ports.items() if d == dpid]
        self._mapped.pop(dpid, None)
        for key in gone:
            del self._ports[key]
            self._agents[key[0]] -= 1
            if not self._agents[key[0]]:
                del self._agents[key[0]]
        for bridge in [k for k, d in self._switch.items() if d == dpid]:
            del self._switch[bridge]
        return len(gone)
