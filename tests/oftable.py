"""A small simulated OpenFlow pipeline over planned rules (in the spirit of Faucet's fakeoftable).

``trace`` injects a packet at a host port and follows matching rules, groups (every bucket) and links, and
reports where copies were delivered, whether any copy looped, and whether any went to the controller.
"""

from dataclasses import dataclass, field


@dataclass
class Trace:
    delivered: set = field(default_factory=set)  # (dpid, port) host-facing outputs
    to_controller: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    looped: bool = False
    paths: list = field(default_factory=list)  # switch sequences, one per delivered copy


def lookup(rules, table, packet):
    best = None
    for rule in rules.flows.values():
        if rule.table != table:
            continue
        if all(packet.get(k) == v for k, v in rule.match):
            if best is None or rule.priority > best.priority:
                best = rule
    return best


def trace(desired, topology, dpid, in_port, packet, max_hops=16):
    result = Trace()
    links = {(link.src, link.src_port): link for link in topology.live_links()}

    def visit(dpid, in_port, path):
        if len(path) > max_hops or dpid in path:
            result.looped = True
            return
        path = path + [dpid]
        pkt = dict(packet, in_port=in_port)
        table, outputs = 0, []
        while True:
            rule = lookup(desired[dpid], table, pkt)
            if rule is None:
                result.dropped.append(dpid)
                return
            goto = None
            for kind, *arg in rule.actions:
                if kind == "output":
                    outputs.append(arg[0])
                elif kind == "group":
                    outputs.extend(desired[dpid].groups[arg[0]].ports)
                elif kind == "controller":
                    result.to_controller.append(dpid)
                elif kind == "goto":
                    goto = arg[0]
            if goto is None:
                break
            table = goto
        if not outputs and not rule.actions:
            result.dropped.append(dpid)
        for port in outputs:
            link = links.get((dpid, port))
            if link is None:
                result.delivered.add((dpid, port))
                result.paths.append(path)
            else:
                visit(link.dst, link.dst_port, path)

    visit(dpid, in_port, [])
    return result
