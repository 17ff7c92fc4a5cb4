"""What the controller knows of the network: switches and their live ports, fabric links, and hosts.

Plain data, no Ryu: app.py feeds it discovery events and asks it questions. A port that carries a discovered
switch-to-switch link is a *fabric* port; every other live port is *host-facing* (access). Hosts are learned
only on access ports, so a packet that crosses the fabric never teaches a wrong location.
"""

from dataclasses import dataclass

import networkx as nx


@dataclass(frozen=True)
class Host:
    ip: str
    mac: str
    dpid: int
    port: int


@dataclass(frozen=True)
class Link:
    """One direction of a switch-to-switch link."""

    src: int
    src_port: int
    dst: int
    dst_port: int


class Topology:
    """Switches, directed fabric links and hosts, with the answers forwarding needs."""

    def __init__(self):
        self.ports = {}  # dpid -> set of live port numbers
        self.links = {}  # (src, src_port) -> Link
        self.hosts = {}  # ip -> Host
        # dpid -> {port: number of directed links ending there}: packet-ins and resyncs ask "is this a fabric
        # port?" constantly, and scanning every link for it is quadratic on a large fabric
        self._link_ends = {}

    # -- switches -------------------------------------------------------------------------------------------
    def add_switch(self, dpid, ports=()):
        self.ports[dpid] = set(ports)

    def remove_switch(self, dpid):
        self.ports.pop(dpid, None)
        for key, link in list(self.links.items()):
            if dpid in (link.src, link.dst):
                self._drop(key)
        for ip, host in list(self.hosts.items()):
            if host.dpid == dpid:
                del self.hosts[ip]

    def port_up(self, dpid, port):
        self.ports.setdefault(dpid, set()).add(port)

    def port_down(self, dpid, port):
        """A port went down: its links go with it (both directions). Hosts behind it are kept: they come back."""
        self.ports.get(dpid, set()).discard(port)
        for key, link in list(self.links.items()):
            if (link.src, link.src_port) == (dpid, port) or (link.dst, link.dst_port) == (dpid, port):
                self._drop(key)

    # -- links ----------------------------------------------------------------------------------------------
    def add_link(self, src, src_port, dst, dst_port):
        """Record a directed link; returns True if it is new. Hosts wrongly learned on that port are forgotten."""
        link = Link(src, src_port, dst, dst_port)
        if self.links.get((src, src_port)) == link:
            return False
        self._drop((src, src_port))  # a re-cabled port: forget where it led before
        self.links[(src, src_port)] = link
        for dpid, port in ((src, src_port), (dst, dst_port)):
            ports = self._link_ends.setdefault(dpid, {})
            ports[port] = ports.get(port, 0) + 1
        for ip, host in list(self.hosts.items()):
            if (host.dpid, host.port) in ((src, src_port), (dst, dst_port)):
                del self.hosts[ip]
        return True

    def remove_link(self, src, src_port, dst, dst_port):
        return self._drop((src, src_port))

    def _drop(self, key):
        """Forget the directed link leaving ``key`` = (dpid, port), keeping the endpoint index in step."""
        link = self.links.pop(key, None)
        if link is None:
            return False
        for dpid, port in ((link.src, link.src_port), (link.dst, link.dst_port)):
            ports = self._link_ends[dpid]
            ports[port] -= 1
            if not ports[port]:
                del ports[port]
                if not ports:
                    del self._link_ends[dpid]
        return True

    def is_fabric_port(self, dpid, port):
        return port in self._link_ends.get(dpid, ())

    def fabric_ports(self, dpid):
        return set(self._link_ends.get(dpid, ()))

    def access_ports(self, dpid):
        return self.ports.get(dpid, set()) - self.fabric_ports(dpid)

    def live_links(self):
        """Links whose both directions are known and whose ports are up: the ones safe to forward over."""
        out = []
        for link in self.links.values():
            reverse = self.links.get((link.dst, link.dst_port))
            if (
                reverse is not None
                and reverse.dst == link.src
                and link.src in self.ports
                and link.dst in self.ports
                and link.src_port in self.ports[link.src]
                and link.dst_port in self.ports[link.dst]
            ):
                out.append(link)
        return out

    # -- hosts ----------------------------------------------------------------------------------------------
    def learn_host(self, ip, mac, dpid, port):
        """Learn (or move) a host seen on an access port. Returns True when something changed."""
        if dpid not in self.ports or self.is_fabric_port(dpid, port):
            return False
        host = Host(ip, mac, dpid, port)
        if self.hosts.get(ip) == host:
            return False
        self.hosts[ip] = host
        return True

    def host_by_mac(self, mac):
        return next((h for h in self.hosts.values() if h.mac == mac), None)

    # -- views ----------------------------------------------------------------------------------------------
    def graph(self):
        """Undirected switch graph over live links; edge attribute ``ports`` maps each end to its port."""
        g = nx.Graph()
        g.add_nodes_from(self.ports)
        for link in self.live_links():
            g.add_edge(link.src, link.dst)
            g.edges[link.src, link.dst].setdefault("ports", {})[link.src] = link.src_port
        return g

    def access_switches(self):
        """Switches with hosts or with live ports that carry no fabric link (leaves / edge switches)."""
        with_hosts = {h.dpid for h in self.hosts.values()}
        return {d for d in self.ports if d in with_hosts or self.access_ports(d)}

    def to_json(self, tiers):
        return {
            "switches": [{"dpid": d, "tier": tiers.get(d, "unknown")} for d in sorted(self.ports)],
            "links": [
                {"src": l.src, "src_port": l.src_port, "dst": l.dst, "dst_port": l.dst_port}
                for l in sorted(self.links.values(), key=lambda l: (l.src, l.src_port))
            ],
            "hosts": [
                {"ip": h.ip, "mac": h.mac, "dpid": h.dpid, "port": h.port}
                for h in sorted(self.hosts.values(), key=lambda h: (h.dpid, h.port, h.ip))
            ],
        }
