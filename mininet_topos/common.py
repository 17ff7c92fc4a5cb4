"""What every mlroute topology shares: explicit DPIDs, OpenFlow 1.3, host addressing, shaped links.

Kept free of project imports (and of Mininet at import time) so ``mn --custom`` can load the topology files by
path and the unit-test fixtures can number switches exactly as the Mininet topologies do.
"""

MAX_DPID = (1 << 64) - 1
MAX_HOSTS = (1 << 24) - 2  # host n is 10.a.b.c with a.b.c = n: 10.255.255.255 is the /8 broadcast


class TopologySizeError(ValueError):
    """A topology size these files cannot number (duplicate DPIDs or addresses would follow)."""


def dpid(n):
    return f"{n:016x}"


def _digits(n):
    return len(str(n))


def fat_tree_dpids(k):
    """DPIDs of a k-ary fat-tree: ``(cores, aggs, edges)``, aggs[pod][i] and edges[pod][i], all distinct.

    Decimal fields so logs stay readable: tier digit, then the pod, then the index, each field wide enough for
    k (edge 1PPII, aggregation 2PPII, core 3000..+i+1). For k <= 10 this is the historic 1000+100*pod+i /
    2000+100*pod+i / 3001+i numbering, unchanged.
    """
    k = int(k)
    if k < 2 or k % 2:
        raise TopologySizeError(f"fat-tree arity k must be even and >= 2, got {k}")
    half = k // 2
    if k * k * k // 4 > MAX_HOSTS:
        raise TopologySizeError(f"a k={k} fat-tree has {k ** 3 // 4} hosts; host addresses 10.a.b.c number at "
                                f"most {MAX_HOSTS}")
    width_i = max(2, _digits(half - 1))
    width_pod = max(1, _digits(k - 1))
    tier = 10 ** (width_pod + width_i)  # > k * 10**width_i > number of cores (half**2)
    cores = [3 * tier + i + 1 for i in range(half * half)]
    aggs = [[2 * tier + pod * 10 ** width_i + i for i in range(half)] for pod in range(k)]
    edges = [[1 * tier + pod * 10 ** width_i + i for i in range(half)] for pod in range(k)]
    if cores[-1] > MAX_DPID:
        raise TopologySizeError(f"a k={k} fat-tree does not fit 64-bit DPIDs")
    return cores, aggs, edges


def leaf_spine_dpids(spines, leaves):
    """DPIDs ``(spines, leaves)`` of a leaf-spine: spine 2·10^w + i + 1, leaf 10^w + i + 1, w digits wide enough
    for both counts (w = 2, i.e. 201.. / 101.., up to 99 of each), so they never collide."""
    spines, leaves = int(spines), int(leaves)
    if min(spines, leaves) < 1:
        raise TopologySizeError("spines and leaves must both be >= 1")
    tier = 10 ** max(2, _digits(max(spines, leaves)))
    return [2 * tier + i + 1 for i in range(spines)], [tier + i + 1 for i in range(leaves)]


def check_host_count(n):
    if n > MAX_HOSTS:
        raise TopologySizeError(f"{n} hosts; host addresses 10.a.b.c number at most {MAX_HOSTS}")


def host_ip(n):
    """Host n (1-based): 10.a.b.c, with a.b.c encoding n (10.0.0.n for n <= 255)."""
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def host_ipv6(ipv4):
    """A host's IPv6 address beside its IPv4 one: fd00::/64 (unique local) with the IPv4 address in the low 32
    bits (10.0.0.1 -> fd00::a00:1), so a dual-stack fabric's two addresses of a host name each other."""
    a, b, c, d = (int(x) for x in ipv4.split("/")[0].split("."))
    return f"fd00::{(a << 8) | b:x}:{(c << 8) | d:x}"


def host_mac(n):
    return f"00:00:00:{(n >> 16) & 255:02x}:{(n >> 8) & 255:02x}:{n & 255:02x}"


def host_params(n):
    """Host n (1-based): IP 10.a.b.c/8 and a MAC that encode n, so addresses never collide at any scale."""
    return {"ip": host_ip(n) + "/8", "mac": host_mac(n)}


def switch_params(n, datapath="user"):
    """OpenFlow 1.3 only; the userspace datapath by default (no OVS kernel module on many VMs); fail mode
    secure: a switch that loses its controller keeps forwarding with the rules it holds (standalone would turn
    it into a learning switch, which storms on a Clos fabric)."""
    return {"dpid": dpid(n), "protocols": "OpenFlow13", "datapath": datapath, "failMode": "secure"}


def link_params(bw=None, mtu=None):
    """TCLink with TX checksum offload off (TCP stalls on OVS's userspace datapath otherwise); ``bw`` in Mb/s."""
    from mininet.link import TCLink

    params = {"cls": TCLink, "txo": False, "rxo": False}
    if bw:
        params["bw"] = float(bw)
    return params


SFLOW_TARGET = "127.0.0.1:6343"  # the controller's collector (sflow.host / sflow.port)
SFLOW_SAMPLING = 64  # 1-in-N packets sampled


def sflow_command(bridges, target=SFLOW_TARGET, sampling=SFLOW_SAMPLING, polling=1, header=128):
    """One ovs-vsctl call that exports sFlow from every bridge in ``bridges`` to ``target`` ("host:port"): a single
    sFlow record shared by them (agent=lo: the agent address is 127.0.0.1; counters every ``polling`` s, which
    also teach the controller each interface's OpenFlow port)."""
    args = ["ovs-vsctl", "--", "--id=@s", "create", "sflow", "agent=lo", f'target="{target}"', f"header={header}",
            f"sampling={int(sampling)}", f"polling={int(polling)}"]
    for bridge in bridges:
        args += ["--", "set", "bridge", bridge, "sflow=@s"]
    return args


def sflow_clear_command(bridges):
    """ovs-vsctl arguments that stop the export (the unreferenced sFlow record is garbage-collected)."""
    args = ["ovs-vsctl"]
    for bridge in bridges:
        args += ["--", "--if-exists", "clear", "bridge", bridge, "sflow"]
    return args
