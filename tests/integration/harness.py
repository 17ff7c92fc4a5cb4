"""The integration tests use the same emulation pieces as `mlroute experiment` (one implementation)."""

from pathlib import Path

from mlroute.experiment.emulation import (  # noqa: F401
                                          Controller,
                                          free_port,
                                          iperf3,
                                          ping_all,
                                          set_jumbo,
                                          start_network,
                                          stop_network,
                                          wait_until,
)

ROOT = Path(__file__).resolve().parents[2]


POLL_S = 2  # the integration tests' poll period
STRIDE4 = [(f"h{i + 1}", f"h{(i + 4) % 16 + 1}") for i in range(8)]  # k=4 fat-tree: h1..h8 -> h5..h12


def te_config(mode: str = "mlroute", extra: str = "") -> str:
    """The controller configuration the integration tests share (2 s polls, 10 Mb/s hosts), plus ``extra``."""
    return f"te:\n  mode: {mode}\n  poll_interval_s: {POLL_S}\n  host_link_mbps: 10\n{extra}"


def stride_loss(net, stride: int) -> int:
    """Pings lost from every host to the host ``stride`` places on (one ping each)."""
    hosts = net.hosts
    return sum(" 0% packet loss" not in h.cmd(f"ping -c1 -W1 {hosts[(i + stride) % len(hosts)].IP()}")
               for i, h in enumerate(hosts))
