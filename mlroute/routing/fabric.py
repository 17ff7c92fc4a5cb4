"""The fabric model: a tiered switch graph with hosts, directed per-link capacities, failures and paths.

Switches carry a ``tier`` (names in :mod:`mlroute.routing.tiers`): ``"leaf"`` / ``"spine"`` for a 2-tier Clos,
``"edge"`` / ``"aggregation"`` / ``"core"`` for a 3-tier fat-tree (``"tor"`` and ``"agg"`` are accepted as
synonyms).  Leaves (ToRs, edge
switches) are tier rank 0; a path is *valley-free* if it first only moves up in rank and then only down.
Every undirected cable is two directed links (``u -> v`` and ``v -> u``) with their own index, and every host
NIC is two directed links too (host -> leaf "up", leaf -> host "down"), so that a flow's rate is limited by its
NICs exactly like by a fabric link.

Link indices: switch links come first (``0 .. n_switch_links-1``, two per cable, in graph edge order), then the
NIC links of the hosts known when the fabric was built (for the generators: host ``h`` has its up link at
``n_switch_links + 2h`` and its down link right after).  A flow whose ``src_tor`` / ``dst_tor`` put a host
somewhere the fabric did not know about (e.g. node ids from the paper authors' traffic files) gets a NIC pair
registered on first use, so read ``fabric.capacities`` *after* computing the flows' links (``rates`` and
``report`` in :mod:`mlroute.routing.metric` do).

Naming: ``Fabric.clos`` names ToR i ``"tor<i>"`` and spine j ``"spine<j>"``.  ``Fabric.fattree(k)`` names core
switch c ``"core<c>"`` (c = i*(k/2)+j is attached to aggregation switch i of every pod), aggregation switch i
of pod p ``"agg<p>_<i>"`` and edge switch i of pod p ``"edge<p>_<i>"``; hosts are numbered pod -> edge -> host,
host h sits under edge switch h // (k/2) (``fabric.leaves`` is in that order).
"""

from __future__ import annotations

import copy
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from mlroute.errors import MlrouteError
from mlroute.routing import tiers as _tiers
from mlroute.routing.flow import Flow


class FabricError(MlrouteError, ValueError):
    """The fabric or a host/flow does not make sense for it (unknown host, host beyond the fabric...)."""


@dataclass
class _UpSet:
    """All live up-paths of ``h`` hops from one leaf: turning node, links up, links down, nodes."""

    turn: np.ndarray  # (n,) node positions of the turning (top) node, sorted
    up: np.ndarray  # (n, h) link indices leaf -> ... -> turn
    down: np.ndarray  # (n, h) link indices turn -> ... -> leaf
    nodes: np.ndarray  # (n, h+1) node positions leaf ... turn
    unique: bool
    key: int = 0  # identical turn arrays share a key, so joins can be cached
    _sel: dict = field(default_factory=dict, repr=False)
    _names: tuple | None = field(default=None, repr=False)

    def names(self, node_list: list) -> tuple[list[tuple], list[tuple]]:
        """(each row's switch names leaf -> turn, the same turn -> leaf without the turning switch), built once
        for every pair that joins this set: an option's path is two list reads and a concatenation, not a walk
        over node positions."""
        if self._names is None:
            up = [tuple(node_list[x] for x in row) for row in self.nodes.tolist()]
            self._names = (up, [t[-2::-1] for t in up])
        return self._names

    def select(self, name: str, idx, jkey):
        """Rows ``idx`` of one of the arrays (``idx`` None = all rows, no copy), cached per join key."""
        if idx is None:
            if name == "upT" or name == "downT":
                hit = self._sel.get(name)
                if hit is None:
                    hit = self._sel[name] = np.ascontiguousarray(getattr(self, name[:-1]).T)
                return hit
            return getattr(self, name)
        ck = (name, jkey)
        hit = self._sel.get(ck)
        if hit is None:
            if name in ("upT", "downT"):
                hit = np.ascontiguousarray(getattr(self, name[:-1])[idx].T)
            else:
                hit = getattr(self, name)[idx]
            self._sel[ck] = hit
        return hit


class PathSet:
    """The candidate paths of one (source leaf, destination leaf) pair, in a fixed order.

    ``up`` / ``down`` are (P, h) arrays of the switch-link indices of each path's up half (leaf to turning
    switch) and down half; ``links()`` is their concatenation (K = 2h columns, 0 for an intra-leaf pair);
    ``turn`` the node position of each path's turning switch (spine/core/aggregation).  Arrays are shared
    with the per-leaf up-path tables whenever the pair can use all of them (no copy per pair), so that
    100,000 flows on a large fat-tree stay cheap.
    """

    #: ((dummy, K), the links padded to K columns), set by ``Problem.option_links`` for small sets
    _padded: tuple

    def __init__(self, fabric, src_leaf, dst_leaf, a=None, b=None, ia=None, ib=None, jkey=None, kind="inter"):
        self.fabric = fabric
        self.src_leaf = src_leaf
        self.dst_leaf = dst_leaf
        self._a, self._b, self._ia, self._ib, self._jkey = a, b, ia, ib, jkey
        self.kind = kind  # "inter", "intra" (same leaf) or "none" (no live path)
        self._paths = None
        self._one: dict[int, tuple] = {}  # options built by path(i)
        self._turns: list[int] | None = None
        if kind == "intra":
            p = fabric.node_pos[src_leaf]
            z = np.zeros((1, 0), dtype=np.int64)
            self.up = self.down = z
            self.upT = self.downT = np.zeros((0, 1), dtype=np.int64)
            self.up_nodes = self.down_nodes = np.array([[p]])
            self.turn = np.array([p])
        elif kind == "none":
            z = np.zeros((0, 0), dtype=np.int64)
            self.up = self.down = self.up_nodes = self.down_nodes = z
            self.upT = self.downT = z
            self.turn = np.zeros(0, dtype=np.int64)
        else:
            # (a whole table, the common case: its own arrays, without a cache lookup each)
            self.turn = a.turn if ia is None else a.select("turn", ia, jkey)
            self.up = a.up if ia is None else a.select("up", ia, jkey)
            self.down = b.down if ib is None else b.select("down", ib, jkey)
            self.upT = a.select("upT", ia, jkey)
            self.downT = b.select("downT", ib, jkey)

    def __len__(self) -> int:
        return len(self.turn)

    @property
    def hops(self) -> int:
        return self.up.shape[1]

    @property
    def turn_group(self) -> Hashable:
        """Equal for path sets of one fabric whose ``turn`` arrays are equal (the same join of up-path tables
        with equal turning switches): a lookup by turning switch can be done once per group."""
        return self._jkey if self.kind == "inter" else (self.kind, self.src_leaf)

    def links(self) -> np.ndarray:
        return np.hstack((self.up, self.down))

    @property
    def paths(self) -> list[tuple]:
        if self._paths is None:
            self._paths = [self.path(i) for i in range(len(self))] if self.kind != "intra" else [(self.src_leaf,)]
        return self._paths

    def path(self, i: int) -> tuple:
        """Option i as a tuple of switch names (without building the whole list when it is long)."""
        if self._paths is not None:
            return self._paths[i]
        if self.kind == "intra":
            return (self.src_leaf,)
        one = self._one
        hit = one.get(i)
        if hit is None:  # one option at a time: a routing reads one or two options of most sets
            a, b, ia, ib = self._a, self._b, self._ia, self._ib
            up = (a._names or a.names(self.fabric.node_list))[0]
            down = (b._names or b.names(self.fabric.node_list))[1]
            hit = one[i] = up[i if ia is None else int(ia[i])] + down[i if ib is None else int(ib[i])]
        return hit

    def _turn_list(self) -> list[int]:
        """``turn`` (sorted) as a list, to bisect: numpy's searchsorted costs ~2 us per scalar."""
        if self._turns is None:
            self._turns = self.turn.tolist()
        return self._turns

    def turning_at(self, node_pos: int) -> int:
        """Position of the one option that turns at the switch at ``node_pos``, or -1 (none, or several)."""
        turns = self._turn_list()
        i = bisect_left(turns, node_pos)
        if i < len(turns) and turns[i] == node_pos and (i + 1 == len(turns) or turns[i + 1] != node_pos):
            return i
        return -1

    def index_of(self, path) -> int:
        """Position of ``path`` among the options, or -1."""
        if path is None:
            return -1
        path = tuple(path)
        if self.kind == "intra":
            return 0 if path == (self.src_leaf,) else -1
        h = self.hops
        if len(path) != 2 * h + 1 or not len(self.turn):
            return -1
        try:
            mid = self.fabric.node_pos[path[h]]
        except (KeyError, TypeError):
            return -1
        turns = self._turn_list()
        for i in range(bisect_left(turns, mid), bisect_right(turns, mid)):
            if self.path(i) == path:
                return i
        return -1


def _ranks(graph: nx.Graph) -> tuple[dict, int]:
    """Each switch's rank from its ``tier`` attribute (0: leaf / edge), and the fabric's number of tiers."""
    given = nx.get_node_attributes(graph, "tier")
    named = {node: _tiers.canonical(given.get(node)) for node in graph.nodes}
    has_agg = _tiers.AGGREGATION in named.values()
    ranks = {}
    for node, tier in named.items():
        if tier is None:
            raise FabricError(f"switch {node!r} has no valid tier attribute (got {given.get(node)!r})")
        ranks[node] = _tiers.rank(tier, has_agg)
    return ranks, 3 if has_agg else 2


class Fabric:
    """A tiered (2- or 3-tier) switch fabric with hosts; see the module docstring for conventions."""

    n_hosts: int  # set by the generated fabrics' constructors (clos, fattree)
    k: int  # the arity of a generated fat-tree

    def __init__(
        self,
        graph: nx.Graph,
        hosts: dict | None = None,
        capacity: float = 1.0,
        host_capacity: float | None = None,
        *,
        kind: str = "graph",
        hosts_per_tor: int | None = None,
        tiers: Mapping | None = None,
    ):
        self.kind = kind
        self.graph = nx.Graph(graph)
        if tiers is not None:  # on the copy: the caller's graph (a controller's live graph) is not written to
            nx.set_node_attributes(self.graph, {n: tiers[n] for n in self.graph.nodes}, "tier")
        self.default_capacity = float(capacity)
        self.host_capacity = float(capacity if host_capacity is None else host_capacity)
        ranks, self.n_tiers = _ranks(self.graph)
        self.rank = ranks
        order = _stable_order(self.graph.nodes)
        first = {n: i for i, n in enumerate(order)}
        self.node_list = sorted(order, key=lambda n: (ranks[n], first[n]))
        self.node_pos = {n: i for i, n in enumerate(self.node_list)}
        self.leaves = [n for n in self.node_list if ranks[n] == 0]
        self.leaf_pos = {n: i for i, n in enumerate(self.leaves)}
        top = max(ranks.values()) if ranks else 0
        self.tops = [n for n in self.node_list if ranks[n] == top and top > 0]
        self.links, caps = self._directed_links(capacity)
        self.link_index = {link: i for i, link in enumerate(self.links)}
        self.n_switch_links = len(self.links)
        self._caps = caps
        self._cap_array: np.ndarray | None = None
        self.hosts_per_tor = hosts_per_tor
        self.hosts: dict = {}
        self._nic: dict = {}
        for h, leaf in (hosts or {}).items():
            if leaf not in self.leaf_pos:
                raise FabricError(f"host {h!r} attaches to {leaf!r}, which is not a leaf/edge switch")
            self.hosts[h] = leaf
            self._register_nic(h, leaf)
        self._tor_cache: dict = {}
        self.failed_nodes: set = set()
        self.failed_links: set = set()
        self._version = 0
        self._uid = uuid.uuid4().hex  # survives pickling: a worker process's copy is the same fabric
        self.derived_from: tuple | None = None  # the identity of the fabric this one is with links down
        self._invalidate()

    def _directed_links(self, capacity: float) -> tuple[list[tuple], list[float]]:
        """Every switch link both ways, lower tier first, in node order; and each one's capacity."""
        ranks = self.rank
        links: list[tuple] = []
        caps: list[float] = []
        edges = []
        for u, v, data in self.graph.edges(data=True):
            if ranks[u] > ranks[v]:
                u, v = v, u
            edges.append((self.node_pos[u], self.node_pos[v], u, v, data))
        for _, _, u, v, data in sorted(edges, key=lambda e: (e[0], e[1])):
            if ranks[u] == ranks[v]:
                raise FabricError(f"link {u!r}-{v!r} joins two switches of the same tier")
            c = float(data.get("capacity", capacity))
            links += [(u, v), (v, u)]
            caps += [c, c]
        return links, caps

    # ------------------------------------------------------------------ generators
    @classmethod
    def clos(cls, tors: int, spines: int, hosts_per_tor: int, capacity: float = 1.0, failed_spines: Iterable = ()):
        """A 2-tier leaf-spine Clos: every ToR ``tor<i>`` linked to every spine ``spine<j>``."""
        if tors < 1 or spines < 1 or hosts_per_tor < 1:
            raise FabricError("a Clos fabric needs at least one ToR, one spine and one host per ToR")
        g = nx.Graph()
        for i in range(tors):
            g.add_node(f"tor{i}", tier=_tiers.LEAF)
        for j in range(spines):
            g.add_node(f"spine{j}", tier=_tiers.SPINE)
        for i in range(tors):
            for j in range(spines):
                g.add_edge(f"tor{i}", f"spine{j}")
        hosts = {h: f"tor{h // hosts_per_tor}" for h in range(tors * hosts_per_tor)}
        fab = cls(g, hosts, capacity, kind="clos", hosts_per_tor=hosts_per_tor)
        fab.n_hosts = tors * hosts_per_tor
        for s in failed_spines:
            fab.fail_switch(s if isinstance(s, str) else f"spine{int(s)}")
        return fab

    @classmethod
    def fattree(cls, k: int, capacity: float = 1.0):
        """A k-ary 3-tier fat-tree (k even): k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""
        if k < 2 or k % 2:
            raise FabricError(f"fat-tree arity k must be even and >= 2 (got {k})")
        half = k // 2
        g = nx.Graph()
        for c in range(half * half):
            g.add_node(f"core{c}", tier=_tiers.CORE)
        for p in range(k):
            for i in range(half):
                g.add_node(f"agg{p}_{i}", tier=_tiers.AGGREGATION)
                g.add_node(f"edge{p}_{i}", tier=_tiers.EDGE)
        for p in range(k):
            for i in range(half):
                for j in range(half):
                    g.add_edge(f"edge{p}_{i}", f"agg{p}_{j}")
                    g.add_edge(f"agg{p}_{i}", f"core{i * half + j}")
        hosts = {h: f"edge{h // (half * half)}_{(h % (half * half)) // half}" for h in range(k * half * half)}
        fab = cls(g, hosts, capacity, kind="fattree", hosts_per_tor=half)
        fab.n_hosts = k * half * half
        fab.k = k
        return fab

    @classmethod
    def from_graph(cls, graph: nx.Graph, hosts: dict, capacity: float = 1.0, host_capacity: float | None = None,
                   tiers: Mapping | None = None):
        """A fabric from a learned switch graph (node attribute ``tier``, or ``tiers``: switch -> tier, which
        takes precedence; optional edge ``capacity``)."""
        return cls(graph, hosts, capacity, host_capacity, tiers=tiers)

    # ------------------------------------------------------------------ capacities and NIC links
    def _register_nic(self, host, leaf) -> int:
        key = (host, leaf)
        idx = self._nic.get(key)
        if idx is None:
            idx = len(self.links)
            self._nic[key] = idx
            self.links.append((("host", host), leaf))
            self.links.append((leaf, ("host", host)))
            self._caps += [self.host_capacity, self.host_capacity]
            self._cap_array = None
        return idx

    @property
    def capacities(self) -> np.ndarray:
        """One capacity per directed link (switch links first, then NIC up/down pairs)."""
        if self._cap_array is None or len(self._cap_array) != len(self._caps):
            self._cap_array = np.asarray(self._caps, dtype=float)
        return self._cap_array

    @property
    def n_links(self) -> int:
        return len(self.links)

    # ------------------------------------------------------------------ placement
    def _leaf_of_tor(self, tor) -> Hashable:
        hit = self._tor_cache.get(tor)
        if hit is not None:
            return hit
        leaf = self._resolve_tor(tor)
        self._tor_cache[tor] = leaf
        return leaf

    def _resolve_tor(self, tor) -> Hashable:
        if tor in self.leaf_pos:
            return tor
        if isinstance(tor, (int, np.integer)) and not isinstance(tor, bool) and 0 <= tor < len(self.leaves):
            return self.leaves[int(tor)]
        raise FabricError(f"ToR {tor!r} is not in the fabric ({len(self.leaves)} ToRs)")

    def host_leaf(self, host) -> Hashable:
        """The leaf (ToR / edge switch) a host sits under by default placement."""
        leaf = self.hosts.get(host)
        if leaf is None:
            n = len(self.hosts)
            raise FabricError(f"unknown host {host!r} (the fabric has {n} hosts" +
                              (f", numbered 0..{n - 1})" if self.kind != "graph" else ")"))
        return leaf

    def src_leaf(self, flow: Flow) -> Hashable:
        return self.host_leaf(flow.src) if flow.src_tor is None else self._leaf_of_tor(flow.src_tor)

    def dst_leaf(self, flow: Flow) -> Hashable:
        return self.host_leaf(flow.dst) if flow.dst_tor is None else self._leaf_of_tor(flow.dst_tor)

    def tor_of(self, flow_or_host):
        """The leaf switch of a host, or ``(source leaf, destination leaf)`` of a Flow."""
        if isinstance(flow_or_host, Flow):
            return self.src_leaf(flow_or_host), self.dst_leaf(flow_or_host)
        return self.host_leaf(flow_or_host)

    def nic_links(self, flow: Flow, src_leaf=None, dst_leaf=None) -> tuple[int, int]:
        """(source host up link, destination host down link) of a flow."""
        nic = self._nic
        s = self.src_leaf(flow) if src_leaf is None else src_leaf
        d = self.dst_leaf(flow) if dst_leaf is None else dst_leaf
        up = nic.get((flow.src, s))
        if up is None:
            up = self._register_nic(flow.src, s)
        down = nic.get((flow.dst, d))
        if down is None:
            down = self._register_nic(flow.dst, d)
        return up, down + 1

    @property
    def identity(self) -> tuple[str, int]:
        """Equal for this fabric and its pickled copies until a switch or link of it fails or is restored;
        another fabric never has it (a decision taken on it can be known to be on the same fabric)."""
        return self._uid, self._version

    # ------------------------------------------------------------------ failures
    def _invalidate(self):
        self._version += 1
        self._upsets: dict = {}
        self._uptrees: dict = {}
        self._pathsets: dict = {}
        self._join_cache: dict = {}
        self._turn_keys: dict = {}
        self._shapes: dict = {}  # leaf -> its up-path tables' (hops, key) pairs (``_shape``)
        self._best_joins: dict = {}  # (shape, shape) -> the join ``pathset`` takes, or None
        self._memo: dict = {}

    def _check_node(self, node):
        if node not in self.graph:
            raise FabricError(f"unknown switch {node!r}")

    def fail_switch(self, node):
        self._check_node(node)
        self.failed_nodes.add(node)
        self._invalidate()

    def restore_switch(self, node):
        self.failed_nodes.discard(node)
        self._invalidate()

    def fail_link(self, u, v):
        """Fail the cable u-v (both directions)."""
        if not self.graph.has_edge(u, v):
            raise FabricError(f"no link {u!r}-{v!r}")
        self.failed_links.add(frozenset((u, v)))
        self._invalidate()

    def restore_link(self, u, v):
        self.failed_links.discard(frozenset((u, v)))
        self._invalidate()

    def with_failed_links(self, failed: Iterable[Iterable], uid: str | None = None) -> Fabric:
        """This fabric with exactly the links ``failed`` down (each a pair of switches; its own failures are
        not carried over), as a new fabric: the graph, tiers and link numbering shared with this one, the
        NIC links and caches its own. What a controller's link failure changes, without building the fabric
        of the live graph again (30 ms of the event loop at k=24) or sending it whole to the optimiser's
        worker, which derives the same fabric from the one it holds. ``uid`` names the result (its
        ``identity``, the same on both sides); a fresh one by default."""
        down = set()
        for link in failed:
            u, v = tuple(link)
            if not self.graph.has_edge(u, v):
                raise FabricError(f"no link {u!r}-{v!r}")
            down.add(frozenset((u, v)))
        out = copy.copy(self)
        out.links, out._caps, out._nic = list(self.links), list(self._caps), dict(self._nic)
        out.hosts, out._tor_cache, out._cap_array = dict(self.hosts), dict(self._tor_cache), None
        out.failed_nodes, out.failed_links = set(), down
        out._uid, out._version, out.derived_from = uid or uuid.uuid4().hex, 0, self.identity
        out._invalidate()
        if not self.failed_nodes and not self.failed_links:
            self._warm(out, self._below({min(link, key=self.rank.__getitem__) for link in down}))
        return out

    def _below(self, nodes: set) -> set:
        """``nodes`` and every switch with an up-path to one of them: the switches whose up-paths a failure of
        links just above ``nodes`` changes (an aggregation-core link: that aggregation switch and the edges of
        its pod)."""
        out, todo = set(nodes), list(nodes)
        rank = self.rank
        while todo:
            node = todo.pop()
            for v in self.graph[node]:
                if rank[v] < rank[node] and v not in out:
                    out.add(v)
                    todo.append(v)
        return out

    def _warm(self, out: Fabric, changed: set) -> None:
        """Give ``out`` (this fabric with links down) the path caches the failure leaves valid: the up-paths of
        switches not ``changed``, and the candidate paths between leaves neither of which is. The turn keys and
        the joins keyed by them are shared, not copied: a key names one turn array in both fabrics (the up-path
        tables both hold cache selections by key), and a join depends on nothing else. A k=24 failure under 10k
        elephants built ~9k leaf pairs' paths again."""
        out._uptrees = {n: t for n, t in self._uptrees.items() if n not in changed}
        out._upsets = {n: t for n, t in self._upsets.items() if n not in changed}
        out._shapes = {n: t for n, t in self._shapes.items() if n not in changed}
        out._pathsets = {k: ps for k, ps in self._pathsets.items() if k[0] not in changed and k[1] not in changed}
        out._turn_keys, out._join_cache, out._best_joins = self._turn_keys, self._join_cache, self._best_joins

    def is_live(self, node) -> bool:
        return node in self.graph and node not in self.failed_nodes

    def is_live_link(self, u, v) -> bool:
        return (self.graph.has_edge(u, v) and frozenset((u, v)) not in self.failed_links
                and u not in self.failed_nodes and v not in self.failed_nodes)

    def live_spines(self) -> list:
        """Live top-tier switches (spines of a Clos, cores of a fat-tree), in order."""
        return [n for n in self.tops if n not in self.failed_nodes]

    def live_links(self) -> list[tuple]:
        return [(u, v) for (u, v) in self.links[: self.n_switch_links] if self.is_live_link(u, v)]

    def is_uniform_two_tier(self) -> bool:
        """2-tier, every live leaf linked to every live spine by a live link of one common capacity."""
        hit = self._memo.get("uniform")
        if hit is None:
            hit = self._memo["uniform"] = self._uniform_two_tier()
        return hit

    def is_graded(self) -> bool:
        """Every switch link joins adjacent tiers (a Clos, a fat-tree): then all the shortest paths between two
        leaves cross tier i -> i+1 at hop i, so a link two of them share sits at the same hop in both."""
        hit = self._memo.get("graded")
        if hit is None:
            rank = self.rank
            hit = self._memo["graded"] = all(abs(rank[u] - rank[v]) == 1 for u, v in self.graph.edges)
        return hit

    def spine_link_index(self):
        """On a uniform 2-tier fabric: (up, down) arrays of shape (leaves, live spines) with the link indices
        leaf -> spine and spine -> leaf (live spines in order); None elsewhere."""
        if "spine_index" not in self._memo:
            out = None
            if self.is_uniform_two_tier():
                sp = self.live_spines()
                li = self.link_index
                up = np.full((len(self.leaves), len(sp)), -1, dtype=np.int64)
                dn = np.full((len(self.leaves), len(sp)), -1, dtype=np.int64)
                for i, leaf in enumerate(self.leaves):
                    if leaf in self.failed_nodes:
                        continue
                    up[i] = [li[(leaf, s)] for s in sp]
                    dn[i] = [li[(s, leaf)] for s in sp]
                out = (up, dn)
            self._memo["spine_index"] = out
        return self._memo["spine_index"]

    def _uniform_two_tier(self) -> bool:
        if self.n_tiers != 2 or self.failed_links and any(
            not (set(link) & self.failed_nodes) for link in self.failed_links
        ):
            return False
        caps = self._caps[: self.n_switch_links]
        if caps and (min(caps) != max(caps)):
            return False
        spines = self.live_spines()
        for leaf in self.leaves:
            if leaf in self.failed_nodes:
                continue
            nbrs = self.graph[leaf]
            if any(s not in nbrs for s in spines):
                return False
        return True

    # ------------------------------------------------------------------ paths
    def _up_adj(self, node) -> list:
        """Live upward neighbours of a switch: [(neighbour, up link index, down link index)], in node order."""
        if node in self.failed_nodes:
            return []
        rank, lidx, pos = self.rank, self.link_index, self.node_pos
        fl = self.failed_links
        out = [(v, lidx[(node, v)], lidx[(v, node)]) for v in self.graph[node]
               if rank[v] > rank[node] and v not in self.failed_nodes
               and not (fl and frozenset((node, v)) in fl)]
        out.sort(key=lambda t: pos[t[0]])
        return out

    def _uptree(self, node) -> dict:
        """All live up-paths from ``node``: {hops: (turn, up, down, nodes)} arrays, unsorted (the neighbours in
        node order, each one's own up-paths in its order: a few concatenations per hop count, not arrays per
        neighbour and path length)."""
        cached = self._uptrees.get(node)
        if cached is not None:
            return cached
        pos = self.node_pos
        me = pos[node]
        adj = self._up_adj(node)
        out: dict[int, tuple] = {}
        if adj:
            top = np.array([pos[v] for v, _, _ in adj], dtype=np.int64)
            lu = np.array([x for _, x, _ in adj], dtype=np.int64)
            ld = np.array([x for _, _, x in adj], dtype=np.int64)
            out[1] = (top, lu[:, None], ld[:, None], np.column_stack((np.full(len(adj), me, dtype=np.int64), top)))
            below = [self._uptree(v) for v, _, _ in adj]
            for h in dict.fromkeys(h for sub in below for h in sub):  # first appearance, as the paths are listed
                has = [j for j, sub in enumerate(below) if h in sub]
                turn, up, down, nodes = (np.concatenate([below[j][h][i] for j in has]) for i in range(4))
                sizes = [len(below[j][h][0]) for j in has]
                first_up = np.repeat(lu[has], sizes)[:, None]
                last_down = np.repeat(ld[has], sizes)[:, None]
                out[h + 1] = (turn, np.hstack((first_up, up)), np.hstack((down, last_down)),
                              np.hstack((np.full((len(turn), 1), me, dtype=np.int64), nodes)))
        self._uptrees[node] = out
        return out

    def _upset(self, leaf) -> dict[int, _UpSet]:
        cached = self._upsets.get(leaf)
        if cached is not None:
            return cached
        out: dict[int, _UpSet] = {}
        for h, (turn, up, down, nodes) in self._uptree(leaf).items():
            keys = [nodes[:, j] for j in range(h - 1, -1, -1)] + [turn]
            order = np.lexsort(keys)
            turn, up, down, nodes = turn[order], up[order], down[order], nodes[order]
            s = _UpSet(turn=turn, up=up, down=down, nodes=nodes,
                       unique=bool(len(turn) < 2 or np.all(turn[1:] != turn[:-1])))
            s.key = self._turn_keys.setdefault(turn.tobytes(), len(self._turn_keys))
            out[h] = s
        self._upsets[leaf] = out
        return out

    def _join(self, a: _UpSet, b: _UpSet):
        ck = (a.key, b.key)
        hit = self._join_cache.get(ck)
        if hit is not None:
            return hit
        if a.unique and b.unique:
            if a.key == b.key:
                ia = ib = None
            else:
                _, ia, ib = np.intersect1d(a.turn, b.turn, assume_unique=True, return_indices=True)
                if len(ia) == len(a.turn):
                    ia = None
                if len(ib) == len(b.turn):
                    ib = None
        else:
            ia_l, ib_l = [], []
            bt = b.turn.tolist()
            for i, t in enumerate(a.turn.tolist()):
                lo = int(np.searchsorted(b.turn, t, "left"))
                hi = int(np.searchsorted(b.turn, t, "right"))
                for j in range(lo, hi):
                    if bt[j] == t:
                        ia_l.append(i)
                        ib_l.append(j)
            ia, ib = np.array(ia_l, dtype=np.int64), np.array(ib_l, dtype=np.int64)
        self._join_cache[ck] = (ia, ib)
        return ia, ib

    def _shape(self, leaf) -> tuple:
        """(hops, key) of each of the leaf's up-path tables: what the join of two leaves' tables depends on."""
        hit = self._shapes.get(leaf)
        if hit is None:
            hit = self._shapes[leaf] = tuple((h, s.key) for h, s in self._upset(leaf).items())
        return hit

    def _best_join(self, src_leaf, dst_leaf):
        """(up-paths of ``src_leaf``, of ``dst_leaf``, ia, ib) of their shortest joined paths, or None. Leaves
        whose tables have the same shapes join alike, so the search over hop counts runs once per pair of
        shapes (a new set of 10k elephants at k=24 asks for 9k new leaf pairs of a few shapes)."""
        ua, ub = self._upset(src_leaf), self._upset(dst_leaf)
        ck = (self._shape(src_leaf), self._shape(dst_leaf))
        if ck in self._best_joins:
            hit = self._best_joins[ck]
            return None if hit is None else (ua[hit[0]], ub[hit[1]], hit[2], hit[3])
        best = None
        for total in range(2, 2 * (max(list(ua) + list(ub) + [0])) + 1):
            for ha in sorted(ua):
                hb = total - ha
                if hb in ub:
                    ia, ib = self._join(ua[ha], ub[hb])
                    n = len(ua[ha].turn) if ia is None else len(ia)
                    if n:
                        # (an irregular graph could offer shortest paths of two shapes; the first is kept)
                        best = (ha, hb, ia, ib)
                        break
            if best is not None:
                break
        self._best_joins[ck] = best
        return None if best is None else (ua[best[0]], ub[best[1]], best[2], best[3])

    def pathset(self, src_leaf, dst_leaf) -> PathSet:
        """Candidate paths between two leaves (all shortest live valley-free paths), cached."""
        key = (src_leaf, dst_leaf)
        ps = self._pathsets.get(key)
        if ps is not None:
            return ps
        if src_leaf in self.failed_nodes or dst_leaf in self.failed_nodes:
            ps = PathSet(self, src_leaf, dst_leaf, kind="none")
        elif src_leaf == dst_leaf:
            ps = PathSet(self, src_leaf, dst_leaf, kind="intra")
        else:
            best = self._best_join(src_leaf, dst_leaf)
            if best is None:
                ps = PathSet(self, src_leaf, dst_leaf, kind="none")
            else:
                a, b, ia, ib = best
                ps = PathSet(self, src_leaf, dst_leaf, a, b, ia, ib, jkey=(a.key, b.key))
        self._pathsets[key] = ps
        return ps

    def candidate_paths(self, flow: Flow) -> list[tuple]:
        """All shortest valley-free paths through live elements, source leaf first (switch names only)."""
        return self.pathset(self.src_leaf(flow), self.dst_leaf(flow)).paths

    def path_links(self, path) -> np.ndarray:
        """Switch-link indices along a path of switch names."""
        li = self.link_index
        try:
            return np.fromiter((li[(path[i], path[i + 1])] for i in range(len(path) - 1)), dtype=np.int64,
                               count=max(len(path) - 1, 0))
        except KeyError as exc:
            raise FabricError(f"path {path!r} uses a link that does not exist: {exc}") from None

    def flow_links(self, flow: Flow, path) -> np.ndarray:
        """Directed link indices a flow crosses on ``path``: source NIC up, switch links, destination NIC down."""
        up, down = self.nic_links(flow)
        mid = self.path_links(path)
        out = np.empty(len(mid) + 2, dtype=np.int64)
        out[0] = up
        out[1:-1] = mid
        out[-1] = down
        return out

    def is_valid_path(self, flow: Flow, path) -> bool:
        """True if ``path`` is one of the flow's candidate paths (live, shortest, valley-free)."""
        return self.pathset(self.src_leaf(flow), self.dst_leaf(flow)).index_of(path) >= 0

    def __repr__(self):
        return (f"Fabric({self.kind}, {len(self.leaves)} leaves, {len(self.tops)} top switches, "
                f"{len(self.failed_nodes)} failed switches, {len(self.failed_links)} failed links)")


def _stable_order(nodes) -> list:
    nodes = list(nodes)
    try:
        return sorted(nodes, key=_natural_key)
    except TypeError:
        return sorted(nodes, key=lambda n: _natural_key(str(n)))


def _natural_key(n):
    if isinstance(n, str):
        import re

        parts = re.split(r"(\d+)", n)
        return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p != "")
    return ((0, n, ""),) if isinstance(n, (int, float)) else ((1, 0, str(n)),)
