"""Read the switches' own flow tables (`ovs-ofctl dump-flows`) and trace where a transport flow really goes.

Used to check traffic engineering from the data plane, not from the controller's account of it.
"""

import ipaddress
import re
import subprocess

FIELD_ALIASES = {"nw_src": "ipv4_src", "nw_dst": "ipv4_dst", "tp_src": "l4_src", "tp_dst": "l4_dst",
                 "dl_type": "eth_type"}
# ovs-ofctl's shorthand words, as the fields they stand for
# (every one ovs-ofctl prints: a word left out would leave a rule matching more than it does, e.g. a fabric port's
# "icmp6,in_port=2" read as all of that port's traffic)
PROTO_WORDS = {"ip": {"eth_type": "0x0800"}, "arp": {"eth_type": "0x0806"}, "ipv6": {"eth_type": "0x86dd"},
               "tcp": {"eth_type": "0x0800", "ip_proto": "6"}, "udp": {"eth_type": "0x0800", "ip_proto": "17"},
               "icmp": {"eth_type": "0x0800", "ip_proto": "1"}, "tcp6": {"eth_type": "0x86dd", "ip_proto": "6"},
               "udp6": {"eth_type": "0x86dd", "ip_proto": "17"}, "icmp6": {"eth_type": "0x86dd", "ip_proto": "58"},
               "sctp": {"eth_type": "0x0800", "ip_proto": "132"}, "sctp6": {"eth_type": "0x86dd", "ip_proto": "132"}}


def dump_flows(bridge):
    out = subprocess.run(["ovs-ofctl", "--no-names", "-O", "OpenFlow13", "dump-flows", bridge],
                         capture_output=True, text=True, check=True).stdout
    return [r for r in (parse_flow(line) for line in out.splitlines()) if r is not None]


def parse_flow(line):
    m = re.search(r"table=(\d+).*?\spriority=(\d+)(,\S*)?\s+actions=(\S+)", line)
    if not m:
        return None
    table, priority, match_text, actions = int(m.group(1)), int(m.group(2)), m.group(3) or "", m.group(4)
    cookie = int(re.search(r"cookie=(0x[0-9a-f]+)", line).group(1), 16)
    match = {}
    for part in match_text.strip(",").split(","):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            match[FIELD_ALIASES.get(k, k)] = v
        elif part in PROTO_WORDS:
            match.update(PROTO_WORDS[part])
        else:
            raise ValueError(f"ovs-ofctl match word {part!r} not understood: {line}")
    return {"table": table, "priority": priority, "match": match, "actions": actions, "cookie": cookie,
            "n_bytes": int(re.search(r"n_bytes=(\d+)", line).group(1))}


def _field_matches(have, want):
    """``want`` as ovs-ofctl prints it: a value, an address prefix (``10.0.0.0/30``, compact forwarding) or an
    address and any mask (``0.0.0.1/0.0.0.1``, ECMP spread without groups)."""
    if "/" in want and have is not None:
        value, mask = want.split("/", 1)
        try:
            if "." in mask:
                bits = int(ipaddress.ip_address(mask))
                return int(ipaddress.ip_address(have)) & bits == int(ipaddress.ip_address(value)) & bits
            return ipaddress.ip_address(have) in ipaddress.ip_network(want, strict=False)
        except ValueError:
            return False
    return have == want


def _lookup(rules, table, pkt):
    cands = [r for r in rules if r["table"] == table
             and all(_field_matches(pkt.get(k), v) for k, v in r["match"].items())]
    return max(cands, key=lambda r: r["priority"]) if cands else None


def trace_elephant(tables, links, elephant, ingress, max_hops=8):
    """Follow ``elephant`` (REST dict) from ``ingress`` (dpid, in_port) through dumped ``tables``.

    ``tables``: dpid -> parsed rules; ``links``: (dpid, port) -> (dpid, port) from the REST topology.
    Returns the list of directed switch links crossed, or raises AssertionError on a group (an ECMP choice
    the controller did not pin), a drop or a loop.
    """
    dpid, in_port = ingress
    base = {"eth_type": "0x0800", "ipv4_src": elephant["src_ip"], "ipv4_dst": elephant["dst_ip"],
            "ip_proto": str(elephant["proto"]),
            "l4_src": str(elephant["src_port"]), "l4_dst": str(elephant["dst_port"])}
    crossed = []
    for _ in range(max_hops):
        pkt = dict(base, in_port=str(in_port))
        table, out_port = 0, None
        while out_port is None:
            rule = _lookup(tables[dpid], table, pkt)
            assert rule is not None, f"no rule at {dpid} table {table} for {elephant}"
            acts = rule["actions"]
            if m := re.search(r"output:(\d+)", acts):
                out_port = int(m.group(1))
            elif "group:" in acts:
                raise AssertionError(f"{elephant['src_ip']}->{elephant['dst_ip']} hits an ECMP group at {dpid}")
            elif m := re.search(r"goto_table:(\d+)", acts):
                table = int(m.group(1))
            else:
                raise AssertionError(f"dropped at {dpid}: {acts}")
        nxt = links.get((dpid, out_port))
        if nxt is None:
            return crossed  # delivered on a host port
        crossed.append((dpid, nxt[0]))
        dpid, in_port = nxt
    raise AssertionError(f"loop tracing {elephant}")


def bridges(fab):
    """dpid -> Open vSwitch bridge of every switch of ``fab`` whose tables can be dumped: Mininet's and those
    outside it (``fab.outside``: a bridge standing in for a lab switch; a real switch is not among them)."""
    names = {int(sw.dpid, 16): sw.name for sw in fab.net.switches}
    names.update(getattr(fab, "outside", {}))
    return names


def dataplane_paths(fab, elephants):
    """Directed switch links each elephant (REST dicts) crosses, traced through `ovs-ofctl dump-flows` of every
    switch of the running fabric ``fab``, keyed by (src_ip, dst_ip, src_port, dst_port)."""
    topo = fab.controller.get("/mlroute/topology")
    links = {(link["src"], link["src_port"]): (link["dst"], link["dst_port"]) for link in topo["links"]}
    hosts = {h["ip"]: (h["dpid"], h["port"]) for h in topo["hosts"]}
    tables = {dpid: dump_flows(name) for dpid, name in bridges(fab).items()}
    return {(e["src_ip"], e["dst_ip"], e["src_port"], e["dst_port"]):
            trace_elephant(tables, links, e, hosts[e["src_ip"]]) for e in elephants}


def pinned_in_the_tables(fab, n=8):
    """The directed switch links each elephant crosses, keyed by (src_ip, dst_ip, src_port, dst_port), when REST
    says ``n`` elephants (at least) are pinned and the switches' tables take each of them on its pinned path;
    else None. A real switch's tables cannot be dumped from here (``fab.opaque``): the pins as REST says."""
    elephants = fab.controller.get("/mlroute/elephants")
    if len(elephants) < n or not all(e["path"] for e in elephants):
        return None
    rest = {(e["src_ip"], e["dst_ip"], e["src_port"], e["dst_port"]): list(zip(e["path"], e["path"][1:]))
            for e in elephants}
    if getattr(fab, "opaque", ()):
        return rest
    try:
        crossed = dataplane_paths(fab, elephants)
    except (AssertionError, KeyError):  # an ECMP group on the way, or a host not re-learned yet
        return None
    return crossed if all(rest[k] == links for k, links in crossed.items()) else None


def disjoint_in_the_tables(fab, n=8):
    """``pinned_in_the_tables``, when no two of the elephants share a directed link; else None."""
    crossed = pinned_in_the_tables(fab, n)
    used = [link for links in (crossed or {}).values() for link in links]
    return crossed if crossed and len(used) == len(set(used)) else None

