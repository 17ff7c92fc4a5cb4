"""The desired state of every switch, kept up to date per event instead of rebuilt on every one.

``sync.desired_state`` (the forwarding plan plus the TE layer, from scratch) stays the reference; ``PlanState``
holds the same value and changes only what an event affects, returning the switches whose rules changed:

* a new transport flow adds its counting rule on its ingress switch (nothing else is looked at);
* a host (learned, moved, gone) adds or removes its forwarding rules on the switches of its shortest-path DAG
  (compact forwarding on a Clos: a new host that falls inside an entry of its own next hops, or that a
  host-facing switch's default serves, changes nothing there; elsewhere, and after any host is gone, the
  switch's compact tables (IPv4, IPv6) are recomputed by ``forwarding.compact_table`` itself: per run of
  addresses behind one switch, not per host; an IPv6 host's solicitation entry is written per host as ever);
* a link / port / switch change updates, per destination switch, the BFS distances only where they can have
  changed (a removed link whose farther end keeps another parent one hop closer changes nothing but that end's
  next hops; an added link between adjacent levels only adds a next hop; anything else re-runs that
  destination's BFS) and rewrites only the (destination host, switch) entries whose next hops changed;
* pins (TE decisions) and tier changes recompute the TE-layer rules they feed.

The TE layer is built by ``te_rules.host_miss_rules`` / ``counting_rule`` / ``pin_rules`` themselves over one
host, flow or pin at a time, so there is one definition of those rules. Group ids come from
``forwarding.group_id_for`` per switch; they equal the reference's whenever no two bucket lists of a switch share
a crc32 slot (a collision still gets a unique, stable id, possibly another one than a from-scratch build would
pick).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import networkx as nx

from controller.desired import forwarding, te_rules
from controller.desired.flowcopy import CONTROLLER_COPY, NewFlowCopy
from controller.desired.link_distances import (
    Adjacency,
    adjacency,
    after_removals,
    hops_of,
    link_changes,
    local_changes,
)
from controller.desired.rules import PRIO_HOST, TABLE_FORWARD, FlowRule, GroupRule, RuleKey, SwitchRules
from controller.state.flowkey import FlowKey, is_ipv6
from controller.state.tiers import TierInference, hops_from
from controller.state.topology import Host, Topology

PAUSE_EVERY = 4096  # rule writes between two calls of the pause hook (lets an event loop breathe)


class PlanState:
    """Every switch's desired rules (``desired``: dpid -> SwitchRules), updated per event.

    ``pause`` is called every few thousand rule writes during long updates (the Ryu shell passes a green-thread
    yield), so a first install on a large fabric does not hold the event loop.
    """

    def __init__(self, *, stagger: bool, idle_timeout: int, pause: Callable[[], None] | None = None,
                 copy: NewFlowCopy = CONTROLLER_COPY) -> None:
        self.stagger = stagger
        self.idle_timeout = idle_timeout
        self.copy = copy
        self.pause = pause or (lambda: None)
        self.desired: dict[int, SwitchRules] = {}
        self._graph: nx.Graph | None = None
        self._adj: Adjacency = {}
        self._levels: dict[int, int] = {}
        self._tier_of: dict[int, str] = {}
        self._tiers: TierInference | None = None
        self._hosts: dict[str, Host] = {}
        self._ips_at: dict[int, set[str]] = {}  # destination switch -> IPs of its hosts
        self._v6_at: dict[int, set[str]] = {}  # the IPv6 ones among them (exact solicitations on a Clos too)
        self._dist: dict[int, dict[int, int]] = {}  # destination switch -> BFS distance of every switch
        self._hops: dict[int, dict[int, tuple[int, ...]]] = {}  # destination switch -> next hops per switch
        self._gid: dict[int, dict[tuple, int]] = {}  # switch -> bucket list -> group id
        self._taken: dict[int, dict[int, tuple]] = {}  # switch -> group id -> bucket list
        self._grefs: dict[int, dict[int, int]] = {}  # switch -> group id -> rules using it
        # TE layer: switch -> rule key -> {source: rule}; a rule may come from several sources (two IPs behind
        # one port share their flow-miss rules; a pin's hop rules also come with its flows' counting rules)
        self._te: dict[int, dict[tuple, dict[Any, FlowRule]]] = {}
        self._te_keys: dict[Any, list[tuple[int, tuple]]] = {}  # source -> (dpid, rule key) it contributes
        self._accounting: dict[FlowKey, tuple[int, int]] = {}
        self._by_pair: dict[tuple[str, str], set[FlowKey]] = {}  # (src, dst) -> accounted flows of that pair
        self._pinned: dict[Any, tuple] = {}
        self._pins_on: dict[frozenset, set[Any]] = {}  # a link (its two switches) -> the pins whose paths cross it
        self._touched: set[frozenset] = set()  # links the last graph change added, removed or re-ported
        self._dirty: set[int] = set()
        # per switch of the last update: (flow keys, group ids) it changed, or None for "all of it" (new)
        self.changed: dict[int, tuple[set, set] | None] = {}
        self._writes = 0
        # compact forwarding (a recognised Clos: forwarding.compact_plan): what it holds per switch
        self._compact = False
        self._addresses = _no_addresses()  # per family (address width): the known hosts
        self._owned: dict[int, set[RuleKey]] = {}  # switch -> its compact forwarding rule keys
        self._tables: dict[int, dict[int, forwarding.CompactTable]] = {}  # switch -> width -> its compact table
        self._redo: set[int] = set()  # switches whose compact table must be recomputed in this update
        self._restagger: set[int] = set()  # ... of which those whose level changed (every entry rewritten)
        self._redo_all = False
        self._new_hosts: list[Host] = []

    # -- the one entry point ----------------------------------------------------------------------------------
    def update(self, topology: Topology, graph: nx.Graph, tiers: TierInference | None,
               accounting: Mapping[FlowKey, tuple[int, int]], pinned: Mapping[Any, tuple],
               flows: Iterable[FlowKey] | None = None, copy: NewFlowCopy | None = None) -> set[int]:
        """Bring the state to ``sync.desired_state(topology, tiers, accounting, pinned, graph=graph,
        copy=self.copy)``; returns the switches whose desired rules changed.

        ``graph`` is compared by identity first: pass the same object while the live links are unchanged and
        the graph is not looked at. ``flows`` names the accounting keys that may have changed since the last
        update (None: compare the whole accounting). ``copy`` replaces the new-flow copy policy (a switch said
        what it is: flowcopy.py); None keeps it.
        """
        self._dirty, self.changed = set(), {}
        self._redo, self._redo_all, self._new_hosts, self._restagger = set(), False, [], set()
        hosts = dict(topology.hosts)
        pinned = dict(pinned)
        tiers_changed = tiers is not self._tiers and self._apply_tiers(tiers)
        graph_changed = graph is not self._graph
        adj = adjacency(graph) if graph_changed else self._adj
        compact = forwarding.is_clos_levels(self._levels, adj)
        if compact != self._compact:  # on the state as it was, before this update's links and hosts
            self._convert(compact)
        if graph_changed:
            self._graph = graph
            self._apply_graph(adj)
        hosts_changed = self._apply_hosts(hosts)
        self._finish_forwarding(hosts_changed)
        if copy is not None and copy != self.copy:
            self._apply_copy(copy, pinned)
        if flows is None:
            flows = set(self._accounting) | set(accounting)
        for key in flows:
            self._apply_flow(key, accounting.get(key), pinned)
        # pins hang on the graph only through the links along their paths, and on the tiers
        touched = None if tiers_changed else self._touched if graph_changed else set()
        self._apply_pins(pinned, touched, hosts_changed)
        return self._dirty

    # -- switches and links ------------------------------------------------------------------------------------
    def _apply_graph(self, adj: Adjacency) -> None:
        old = self._adj
        removed, added, moved = link_changes(old, adj)
        gone = old.keys() - adj.keys()
        for s in gone:
            self._drop_switch(s)
        for s in adj.keys() - old.keys():
            self._add_switch(s)
        self._adj = adj
        self._touched = {frozenset(uv) for uv in removed + added + moved}
        self._apply_fabric_ports(old, adj)
        if removed or added or moved:
            for dst in list(self._dist):
                for s in self._update_destination(dst, removed, added, moved):
                    self._write_host_entries(dst, s)
            if self._compact:  # a host-facing switch at a changed link: its fabric ports and transit flags
                # (those next to a changed distance are _rerun's; a switch's transit flags read only its own links)
                levels = self._levels
                self._redo.update(s for uv in self._touched for s in uv if levels.get(s, 0) == 0)
        for s in gone:  # only now: the updates above needed the old distances through them
            self._forget_distances(s)

    def _forget_distances(self, s: int) -> None:
        """A switch gone: its distance and next hops toward every destination."""
        for dist in self._dist.values():
            dist.pop(s, None)
        for hops in self._hops.values():
            hops.pop(s, None)

    def _apply_fabric_ports(self, old: Adjacency, adj: Adjacency) -> None:
        """Keep each switch's per-fabric-port rules (``forwarding.fabric_port_rules``) equal to its links."""
        for s in adj.keys() | old.keys():
            rules = self.desired.get(s)
            if rules is None or old.get(s) == adj.get(s):  # (its links unchanged: most switches, in C)
                continue
            before, after = set(old.get(s, {}).values()), set(adj.get(s, {}).values())
            for port in before - after:
                for rule in forwarding.fabric_port_rules(s, port):
                    rules.flows.pop(rule.key, None)
                    self._touch(s, flow=rule.key)
            for port in after - before:
                for rule in forwarding.fabric_port_rules(s, port):
                    rules.add_flow(rule)
                    self._touch(s, flow=rule.key)

    def _update_destination(self, dst: int, removed: list[tuple[int, int]], added: list[tuple[int, int]],
                            moved: list[tuple[int, int]]) -> set[int]:
        """Switches whose next hops toward ``dst`` changed with these link changes (distances updated)."""
        adj, dist = self._adj, self._dist[dst]
        if dst not in adj:
            return set()
        local = local_changes(adj, dist, removed, added + moved)
        if local is None:
            return self._rerun(dst, removed if not added else None, {s for uv in removed + added + moved for s in uv})
        hops = self._hops[dst]
        changed = set()
        for s in local:
            h = hops_of(adj, dist, s)
            if hops.get(s) != h:
                hops[s] = h
                changed.add(s)
        return changed

    def _rerun(self, dst: int, removed: list[tuple[int, int]] | None, ends: set[int]) -> set[int]:
        """``dst``'s distances again (some changed): the switches whose next hops toward it changed. Links only
        removed (``removed``; None when some were added) move only the switches that lost every parent one hop
        closer (``after_removals``), else the BFS runs again. A switch's next hops follow from its links
        (``ends``: the switches whose links changed) and its own and its neighbours' distances, so only those at
        or next to a changed distance, or at a changed link, are looked at again (a k=24 aggregation-core
        failure moves one core's distance of 720)."""
        adj, dist = self._adj, self._dist[dst]
        if removed is not None:
            new, moved = after_removals(adj, dist, removed)
        else:
            new = hops_from(adj, (dst,))
            moved = {s for s in dist.keys() | new.keys() if dist.get(s) != new.get(s)}
        if self._compact:
            self._redo_near(moved)
        self._dist[dst] = new
        near = moved | ends
        for s in moved:
            near.update(adj.get(s, ()))
        hops, changed = self._hops[dst], set()  # (in place: the order of these dicts is never read)
        for s in near:
            h = hops_of(adj, new, s) if s in new and s != dst else None
            if hops.get(s) != h:
                changed.add(s)
                if h is None:
                    del hops[s]
                else:
                    hops[s] = h
        return changed

    def _add_switch(self, dpid: int) -> None:
        rules = self.desired[dpid] = SwitchRules()
        for rule in forwarding.base_rules(dpid):
            rules.add_flow(rule)
        self._gid[dpid], self._taken[dpid], self._grefs[dpid] = {}, {}, {}
        for holders in self._te.get(dpid, {}).values():
            rules.add_flow(next(reversed(holders.values())))
        self._owned[dpid] = set()
        self._redo.add(dpid)
        self._dirty.add(dpid)
        self.changed[dpid] = None

    def _drop_switch(self, dpid: int) -> None:
        del self.desired[dpid]
        for table in (self._gid, self._taken, self._grefs, self._owned, self._tables):
            table.pop(dpid, None)
        self._dirty.discard(dpid)
        self.changed.pop(dpid, None)

    def _apply_tiers(self, tiers: TierInference | None) -> bool:
        """New tier levels re-stagger the groups of the switches whose level changed; True if tiers changed."""
        self._tiers = tiers
        levels = dict(tiers.levels) if tiers is not None else {}
        tier_of = dict(tiers.tiers) if tiers is not None else {}
        changed = tier_of != self._tier_of or levels != self._levels
        moved = {s for s in levels.keys() | self._levels.keys() if levels.get(s, 0) != self._levels.get(s, 0)}
        self._levels, self._tier_of = levels, tier_of
        if self._compact:  # a level decides the host-port default and the staggering
            self._redo |= moved
            self._restagger |= moved
        if self.stagger:  # (on a Clos: its IPv6 hosts' solicitation entries)
            for dst in self._dist:
                for s in moved & self._hops[dst].keys():
                    self._write_host_entries(dst, s)
        return changed

    # -- hosts and their forwarding entries --------------------------------------------------------------------
    def _apply_hosts(self, hosts: dict[str, Host]) -> bool:
        """Hosts on switches that exist (the reference plans only those) learned, moved or gone."""
        hosts = {ip: h for ip, h in hosts.items() if h.dpid in self.desired}
        old = self._hosts
        gone = [h for ip, h in old.items() if hosts.get(ip) is not h and hosts.get(ip) != h]
        new = [h for ip, h in hosts.items() if old.get(ip) is not h and old.get(ip) != h]
        for h in gone:
            self._forget_host(h)
        self._hosts = hosts
        for h in new:
            self._learn_host(h)
        return bool(gone or new)

    def _learn_host(self, host: Host) -> None:
        dst = host.dpid
        if dst not in self._dist:
            self._dist[dst] = hops_from(self._adj, (dst,))
            self._hops[dst] = {s: hops_of(self._adj, self._dist[dst], s) for s in self._dist[dst] if s != dst}
        self._ips_at.setdefault(dst, set()).add(host.ip)
        v6 = is_ipv6(host.ip)
        if v6:
            self._v6_at.setdefault(dst, set()).add(host.ip)
        self._set_miss_rules(host)
        if self._compact:
            self._new_hosts.append(host)
            self._redo.add(dst)
        matches = forwarding.exact_matches(host.ip, self._compact)
        if not matches:
            return
        for m in matches:
            self._set_forward(dst, m, (("output", host.port),))
        for s, ports in self._hops[dst].items():
            actions = self._actions(s, ports)
            for m in matches:
                self._set_forward(s, m, actions)

    def _set_miss_rules(self, host: Host) -> None:
        """A host's own TE rules (guards, new-flow copies at its port) under the copy policy in force."""
        self._set_source(("miss", host.ip), te_rules.host_miss_rules(host, self.copy))

    def _apply_copy(self, copy: NewFlowCopy, pinned: Mapping[Any, tuple]) -> None:
        """Re-plan what the copy policy shapes (host-port copy rules, a declared pair's ingress) on the switches
        whose policy changed."""
        old, self.copy = self.copy, copy
        changed = {h.dpid for h in self._hosts.values()
                   if (old.learns(h.dpid), old.copies(h.dpid)) != (copy.learns(h.dpid), copy.copies(h.dpid))}
        for host in [h for h in self._hosts.values() if h.dpid in changed]:
            self._set_miss_rules(host)
        for key, path in self._pinned.items():
            src = self._hosts.get(key.src_ip)
            if not isinstance(key, FlowKey) and src is not None and src.dpid in changed and key in pinned:
                self._set_source(("pin", key), self._pin_rules(key, path))

    def _forget_host(self, host: Host) -> None:
        self._set_source(("miss", host.ip), [])
        ips = self._ips_at.get(host.dpid)
        if ips is None or host.ip not in ips:
            return
        ips.discard(host.ip)
        self._v6_at.get(host.dpid, set()).discard(host.ip)
        if self._compact:
            self._redo_all = True  # prefixes may grow anywhere
        for m in forwarding.exact_matches(host.ip, self._compact):
            self._set_forward(host.dpid, m, None)
            for s in self._hops.get(host.dpid, {}):
                self._set_forward(s, m, None)
        if not ips:  # no host left behind this switch: its BFS is no longer needed
            del self._ips_at[host.dpid]
            self._v6_at.pop(host.dpid, None)
            self._dist.pop(host.dpid, None)
            self._hops.pop(host.dpid, None)

    def _write_host_entries(self, dst: int, s: int) -> None:
        """The rules at ``s`` toward every host behind ``dst`` (after ``s``'s next hops or level changed): on a
        Clos, ``s``'s compact tables again and the solicitation entries of ``dst``'s IPv6 hosts."""
        if self._compact:
            self._redo.add(s)
        if s == dst or s not in self.desired:
            return
        ips = self._v6_at.get(dst, ()) if self._compact else self._ips_at.get(dst, ())
        if not ips:
            return
        ports = self._hops[dst].get(s)
        actions = self._actions(s, ports) if ports else None
        for ip in ips:
            for m in forwarding.exact_matches(ip, self._compact):
                self._set_forward(s, m, actions)

    def _actions(self, s: int, ports: tuple[int, ...]) -> tuple:
        if len(ports) == 1:
            return (("output", ports[0]),)
        buckets = forwarding.staggered_buckets(ports, self._levels.get(s, 0) if self.stagger else 0)
        gid = self._gid[s].get(buckets)
        if gid is None:
            gid = forwarding.group_id_for(buckets, self._taken[s])
        return (("group", gid, buckets),)  # the bucket list travels until _set_forward refcounts it

    def _set_forward(self, s: int, m: tuple, actions: tuple | None, priority: int = PRIO_HOST) -> None:
        """Set (or with None, remove) one forwarding rule (toward a host, a prefix, or a host port's default) on
        switch ``s``. ``actions`` may carry a group's bucket list as a third element of its group action (see
        ``_actions``)."""
        rules = self.desired.get(s)
        if rules is None:
            return
        flows = rules.flows
        key = (TABLE_FORWARD, priority, m)
        old = flows.get(key)
        group = None
        if actions and len(actions[0]) == 3:
            _, gid, buckets = actions[0]
            group = (gid, buckets)
            actions = (("group", gid),)
        if old is not None:
            if old.actions == actions:
                return
            if old.actions and old.actions[0][0] == "group":
                if group is not None:
                    self._ref_group(s, *group)  # before the old one goes: it may be the same list
                    group = None
                self._unref_group(s, old.actions[0][1])
        elif actions is None:
            return
        if group is not None:
            self._ref_group(s, *group)
        if actions is None:
            del flows[key]
        else:
            flows[key] = FlowRule(s, priority, m, actions)
        self._touch(s, flow=key)
        self._writes += 1
        if self._writes % PAUSE_EVERY == 0:
            self.pause()

    # -- compact forwarding (forwarding.compact_plan, kept per event) ------------------------------------------
    def _redo_near(self, switches: Iterable[int]) -> None:
        """Host-facing switches at or next to these (their transit flags may have changed) are recomputed."""
        adj, levels = self._adj, self._levels
        for s in switches:
            for t in (s, *adj.get(s, ())):
                if levels.get(t, 0) == 0:
                    self._redo.add(t)

    def _finish_forwarding(self, hosts_changed: bool) -> None:
        """Recompute the compact tables this update touched."""
        if not self._compact:
            return
        if hosts_changed or self._redo_all:
            hosts = [self._hosts[ip] for ips in self._ips_at.values() for ip in ips]
            self._addresses = (forwarding.Addresses.of(h for h in hosts if not is_ipv6(h.ip)),
                               forwarding.Addresses.of((h for h in hosts if is_ipv6(h.ip)), 128))
        if self._redo_all:
            redo = set(self.desired)
        else:
            redo = self._redo & self.desired.keys()
            for host in self._new_hosts:
                redo |= {s for s in self.desired if s not in redo and not self._unchanged_by(s, host)}
        for s in sorted(redo):
            self._recompute(s)

    def _unchanged_by(self, s: int, host: Host) -> bool:
        """Does switch ``s``'s compact table stay as it is with ``host`` learned (nothing else changed)? Yes if
        the host falls inside an entry of its own next hops there, or (host-facing switch) the default serves
        it and it cannot arrive over a fabric link (IPv4: an IPv6 table has no default)."""
        v6 = is_ipv6(host.ip)
        table = self._tables.get(s, {}).get(128 if v6 else 32)
        if table is None or host.dpid == s:
            return False
        label = self._hops.get(host.dpid, {}).get(s) or None
        hit = table.covering(forwarding.ip_int(host.ip))
        bottom = self._levels.get(s, 0) == 0 and not v6
        if hit is not None:
            return hit[2] == label and (not bottom or label == table.default)
        if not bottom:
            return label is None
        return label == table.default and (label is None or not forwarding.is_transit(
            self._adj, self._dist.get(host.dpid, {}), s))

    def _recompute(self, s: int) -> None:
        """Recompute switch ``s``'s compact tables (IPv4, IPv6) and rewrite only the entries that differ from its
        last ones (all of them where its level changed: the same next hops stagger differently)."""
        hops, dist, adj = self._hops, self._dist, self._adj
        old = self._tables.get(s, {})
        new = self._tables[s] = {}
        full = not old or s in self._restagger
        keys: set[RuleKey] = set()
        gone: set[RuleKey] = set()
        for addresses in self._addresses:
            table = new[addresses.width] = forwarding.compact_table(
                addresses, s, lambda d: hops.get(d, {}).get(s) or None,
                self._levels.get(s, 0) == 0 and addresses.width == 32,
                lambda d: forwarding.is_transit(adj, dist.get(d, {}), s), adj.get(s, {}).values())
            write, dropped = _table_change(None if full else old.get(addresses.width), table)
            for priority, m, what in forwarding.compact_rules(write):
                actions = self._actions(s, what) if what and isinstance(what[0], int) else what
                self._set_forward(s, m, actions, priority)
                keys.add((TABLE_FORWARD, priority, m))
            gone |= {(TABLE_FORWARD, priority, m) for priority, m, _ in forwarding.compact_rules(dropped)}
        owned = self._owned.setdefault(s, set())
        drop = owned - keys if full else gone - keys
        for key in drop:
            self._set_forward(s, key[2], None, key[1])
        owned -= drop
        owned |= keys

    def _convert(self, compact: bool) -> None:
        """Per-host forwarding replaced by compact forwarding or back (the tiers changed)."""
        if compact:
            for dst, ips in self._ips_at.items():
                for ip in ips:  # (IPv6 hosts keep their solicitation entries)
                    kept = forwarding.exact_matches(ip, True)
                    for m in (m for m in forwarding.host_matches(ip) if m not in kept):
                        self._set_forward(dst, m, None)
                        for s in self._hops.get(dst, {}):
                            self._set_forward(s, m, None)
            self._compact, self._redo_all = True, True
            return
        for s, keys in self._owned.items():
            for key in keys:
                self._set_forward(s, key[2], None, key[1])
            keys.clear()
        self._tables.clear()
        self._compact = False
        for dst, ips in self._ips_at.items():
            for ip in ips:
                for m in forwarding.host_matches(ip):
                    self._set_forward(dst, m, (("output", self._hosts[ip].port),))
            for s in self._hops.get(dst, {}):
                self._write_host_entries(dst, s)

    def _ref_group(self, s: int, gid: int, buckets: tuple) -> None:
        refs = self._grefs[s]
        if gid not in refs:
            refs[gid] = 0
            self._gid[s][buckets] = gid
            self._taken[s][gid] = buckets
            self.desired[s].add_group(GroupRule(s, gid, buckets))
            self._touch(s, group=gid)
        refs[gid] += 1

    def _unref_group(self, s: int, gid: int) -> None:
        refs = self._grefs[s]
        refs[gid] -= 1
        if not refs[gid]:
            del refs[gid]
            buckets = self._taken[s].pop(gid)
            del self._gid[s][buckets]
            del self.desired[s].groups[gid]
            self._touch(s, group=gid)

    # -- the traffic-engineering layer -------------------------------------------------------------------------
    def _apply_flow(self, key: FlowKey, where: tuple[int, int] | None, pinned: Mapping[Any, tuple],
                    force: bool = False) -> None:
        old = self._accounting.get(key)
        if old == where and not force:
            return  # unchanged; a change of its pin is _apply_pins' business
        pair = (key.src_ip, key.dst_ip)
        if where is None:
            if old is None:
                return
            del self._accounting[key]
            self._by_pair[pair].discard(key)
            if not self._by_pair[pair]:
                del self._by_pair[pair]
            self._set_source(("count", key), [])
            return
        self._accounting[key] = where
        self._by_pair.setdefault(pair, set()).add(key)
        self._set_source(("count", key), [te_rules.counting_rule(self._graph, key, where[0], where[1], pinned,
                                                                 self.idle_timeout)])

    def _apply_pins(self, pinned: dict[Any, tuple], touched: set[frozenset] | None, hosts_changed: bool) -> None:
        """``touched``: the links that changed (None: everything, the tiers changed)."""
        old = self._pinned
        changed = _changed_pins(old, pinned)
        if touched is None:
            changed |= pinned.keys()
        elif touched:  # (the index is of the pins before: those whose paths changed are in ``changed`` already)
            changed |= {k for uv in touched for k in self._pins_on.get(uv, ()) if k in pinned}
        if hosts_changed:  # a host pair's ingress rules hang on its source host
            changed |= {k for k in pinned if not isinstance(k, FlowKey)}
        self._pinned = pinned
        for k in changed:
            self._index_pin(k, old.get(k), pinned.get(k))
        if not changed:
            return
        counts: set[FlowKey] = set()
        for k in changed:
            path = pinned.get(k)
            self._set_source(("pin", k), [] if path is None else self._pin_rules(k, path))
            if isinstance(k, FlowKey):
                if k in self._accounting:
                    counts.add(k)
            else:
                counts |= self._by_pair.get((k.src_ip, k.dst_ip), set())
        for k in counts:
            self._apply_flow(k, self._accounting[k], pinned, force=True)

    def _index_pin(self, key: Any, was: tuple | None, now: tuple | None) -> None:
        """The link -> pins index follows one pin's path (a link change then finds its pins without a scan of
        every pin: 10k pins at k=24 cost ~20 ms a failure)."""
        if was == now:
            return
        for link in map(frozenset, zip(was or (), (was or ())[1:])):
            pins = self._pins_on.get(link)
            if pins is not None:
                pins.discard(key)
                if not pins:
                    del self._pins_on[link]
        for link in map(frozenset, zip(now or (), (now or ())[1:])):
            self._pins_on.setdefault(link, set()).add(key)

    def _pin_rules(self, key: Any, path: tuple) -> list[FlowRule]:
        return te_rules.pin_rules(self._hosts, self._graph, self._tiers, key, path, self.copy)

    def _set_source(self, source: Any, rules: list[FlowRule]) -> None:
        """Replace the TE-layer rules one source (a host's flow misses, a flow, a pin) contributes."""
        new = {(r.dpid, r.key): r for r in rules}
        for dpid, key in self._te_keys.pop(source, []):
            if (dpid, key) not in new:
                holders = self._te[dpid][key]
                del holders[source]
                self._show(dpid, key, holders)
        for (dpid, key), rule in new.items():
            holders = self._te.setdefault(dpid, {}).setdefault(key, {})
            if holders.get(source) != rule:
                holders.pop(source, None)
                holders[source] = rule
                self._show(dpid, key, holders)
        if new:
            self._te_keys[source] = list(new)

    def _show(self, dpid: int, key: tuple, holders: dict[Any, FlowRule]) -> None:
        """Put the rule now held for ``key`` (the latest contribution) into switch ``dpid``'s desired rules."""
        if not holders:
            del self._te[dpid][key]
        rules = self.desired.get(dpid)
        if rules is None:
            return
        rule = next(reversed(holders.values())) if holders else None
        if rules.flows.get(key) == rule:
            return
        if rule is None:
            del rules.flows[key]
        else:
            rules.add_flow(rule)
        self._touch(dpid, flow=key)
        self._tick()

    def _touch(self, dpid: int, flow: tuple | None = None, group: int | None = None) -> None:
        self._dirty.add(dpid)
        if dpid not in self.changed:
            self.changed[dpid] = (set(), set())
        keys = self.changed[dpid]
        if keys is not None:
            if flow is not None:
                keys[0].add(flow)
            if group is not None:
                keys[1].add(group)

    def _tick(self) -> None:
        self._writes += 1
        if self._writes % PAUSE_EVERY == 0:
            self.pause()


def _no_addresses() -> tuple[forwarding.Addresses, forwarding.Addresses]:
    return forwarding.Addresses.of(()), forwarding.Addresses.of((), 128)


def _table_change(old: forwarding.CompactTable | None, table: forwarding.CompactTable
                  ) -> tuple[forwarding.CompactTable, forwarding.CompactTable]:
    """What a compact table's recomputation writes (its entries and default ports not in ``old``) and removes
    (``old``'s not in the new one); everything written when there is no ``old`` to compare with."""
    if old is None:
        return table, forwarding.CompactTable((), None, (), table.width)
    before, after = set(old.entries), set(table.entries)
    same_default = old.default == table.default
    write = forwarding.CompactTable(
        tuple(e for e in table.entries if e not in before), table.default,
        tuple(p for p in table.default_ports if not same_default or p not in old.default_ports), table.width)
    gone = forwarding.CompactTable(
        tuple(e for e in old.entries if e not in after), old.default,
        tuple(p for p in old.default_ports if not same_default or p not in table.default_ports), old.width)
    return write, gone


def _changed_pins(old: Mapping[Any, tuple], new: Mapping[Any, tuple]) -> set[Any]:
    """The keys whose pin differs between ``old`` and ``new``. A decision lists the pins it keeps in the order
    it found them, so both are walked in step: a key at the same place in both is compared there, without
    hashing (a flow key hashes in Python: looking up 10k pins in both cost ~8 ms of every link event's sync).
    Where they fall out of step (a pin dropped, or moved to the end: a repaired decision re-adds its broken
    pins last), a short look-ahead finds where they meet again, and only the keys skipped are looked up;
    without it, four repaired pins among 10k put every key after the first out of step (~20 ms)."""
    changed: set[Any] = set()
    apart: list[Any] = []
    a, b = list(old.items()), list(new.items())
    i = j = 0
    while i < len(a) and j < len(b):
        (k, was), (key, now) = a[i], b[j]
        if k is key or k == key:
            if was != now:
                changed.add(k)
            i, j = i + 1, j + 1
            continue
        skip_old, skip_new = _meet_again(a, b, i, j)
        apart += (item[0] for item in a[i:i + skip_old])
        apart += (item[0] for item in b[j:j + skip_new])
        i, j = i + skip_old, j + skip_new
    apart += (item[0] for item in a[i:])
    apart += (item[0] for item in b[j:])
    changed.update(k for k in apart if old.get(k) != new.get(k))
    return changed


LOOK_AHEAD = 8  # pins dropped or moved in a row that the in-step walk of _changed_pins steps over


def _meet_again(a: list, b: list, i: int, j: int) -> tuple[int, int]:
    """How many items of ``a`` (from ``i``) and of ``b`` (from ``j``) to skip so that the walk is in step
    again: the fewest within LOOK_AHEAD, else one of each."""
    for d in range(1, LOOK_AHEAD + 1):
        if i + d < len(a) and (a[i + d][0] is b[j][0] or a[i + d][0] == b[j][0]):
            return d, 0
        if j + d < len(b) and (b[j + d][0] is a[i][0] or b[j + d][0] == a[i][0]):
            return 0, d
    return 1, 1
