"""What every mlroute topology shares: explicit DPIDs, OpenFlow 1.3, host addressing, shaped links.

Kept free of project imports so ``mn --custom`` can load the topology files by path.
"""

from mininet.link import TCLink


def dpid(n):
    return "%016x" % n


def host_params(n):
    """Host n (1-based): IP 10.a.b.c/8 and a MAC that encode n, so addresses never collide at any scale."""
    return {"ip": "10.%d.%d.%d/8" % ((n >> 16) & 255, (n >> 8) & 255, n & 255),
            "mac": "00:00:00:%02x:%02x:%02x" % ((n >> 16) & 255, (n >> 8) & 255, n & 255)}


def switch_params(n, datapath="user"):
    """OpenFlow 1.3 only; the userspace datapath by default (no OVS kernel module on many VMs)."""
    return {"dpid": dpid(n), "protocols": "OpenFlow13", "datapath": datapath}


def link_params(bw=None, mtu=None):
    """TCLink with TX checksum offload off (TCP stalls on OVS's userspace datapath otherwise); ``bw`` in Mb/s."""
    params = {"cls": TCLink, "txo": False, "rxo": False}
    if bw:
        params["bw"] = float(bw)
    return params
