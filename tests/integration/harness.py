"""The integration tests use the same emulation pieces as `mlroute experiment` (one implementation)."""

import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

from mlroute.experiment.emulation import (  # noqa: F401
                                          Controller,
                                          free_port,
                                          iperf3,
                                          ping_all,
                                          ping_all_concurrently,
                                          set_jumbo,
                                          start_network,
                                          stop_network,
                                          wait_until,
)
from mlroute.experiment.traffic import received_per_second

ROOT = Path(__file__).resolve().parents[2]
#: the venv with os-ken 4 that scripts/test.sh makes (MLROUTE_FRAMEWORK=os-ken MLROUTE_VENV=.venv-osken setup_env.sh)
OSKEN_PYTHON = Path(os.environ.get("MLROUTE_OSKEN_PYTHON", ROOT / ".venv-osken" / "bin" / "python"))


def framework_options(framework: str) -> dict:
    """Controller(...) arguments that run the controller under ``framework``: Ryu from this venv
    (ryu-manager), os-ken from OSKEN_PYTHON's venv (mlroute controller)."""
    return {} if framework == "ryu" else {"framework": framework, "python": str(OSKEN_PYTHON)}


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


def no_loss_with_link_cut(net, a: str, b: str, stride: int, timeout: float = 20) -> bool:
    """Cut the link between switches ``a`` and ``b``: does every host reach the host ``stride`` on without a
    lost ping within ``timeout``? The link is restored either way."""
    net.configLinkStatus(a, b, "down")
    try:
        return bool(wait_until(lambda: stride_loss(net, stride) == 0 or None, timeout=timeout, interval=0))
    finally:
        net.configLinkStatus(a, b, "up")


def random_bijection(hosts: int, per_switch: int, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` distinct sources sending to ``n`` distinct destinations (Mininet names h1..), none to a host under
    its own access switch (``per_switch`` hosts each, numbered in order), from a seeded generator."""
    rng = random.Random(seed)
    while True:
        src, dst = rng.sample(range(hosts), n), rng.sample(range(hosts), n)
        if all(s // per_switch != d // per_switch for s, d in zip(src, dst)):
            return [(f"h{s + 1}", f"h{d + 1}") for s, d in zip(src, dst)]


def pinned_paths(ctl, base_port: int, n: int):
    """The pinned paths of the ``n`` elephants whose server ports start at ``base_port``, once all are pinned."""
    mine = [e for e in ctl.get("/mlroute/elephants") if base_port <= e["dst_port"] < base_port + n]
    return [e["path"] for e in mine] if len(mine) == n and all(e["path"] for e in mine) else None


def link_loads(paths) -> Counter:
    """Elephants per directed switch-to-switch link."""
    return Counter((a, b) for p in paths for a, b in zip(p, p[1:]))


def wait_pinned_disjoint(ctl, base_port: int, n: int, timeout: float, avoid=()):
    """Wait until the ``n`` elephants are pinned on paths that share no link (and cross no link in ``avoid``,
    as (a, b) dpid pairs in either direction); returns (seconds until all were pinned, seconds until disjoint,
    the paths or None). Elephants are pinned as they are detected, so the first paths may still share."""
    started = time.time()
    assert wait_until(lambda: pinned_paths(ctl, base_port, n), timeout=timeout, interval=0.5), \
        ctl.get("/mlroute/elephants")
    pinned_s = time.time() - started
    banned = {tuple(link) for link in avoid} | {tuple(reversed(link)) for link in avoid}

    def good():
        paths = pinned_paths(ctl, base_port, n)
        loads = link_loads(paths or [])
        return paths if paths and max(loads.values()) == 1 and not banned & set(loads) else None
    paths = wait_until(good, timeout=10 * POLL_S, interval=0.5)
    if paths is None:  # say why in the test's output: the TE decisions of the run
        print("\n".join(line for line in ctl.log().splitlines() if line.startswith("te:") or "optimiser" in line))
    return pinned_s, time.time() - started, paths


def rate_after_pinning(reports, pinned_at_s: float, seconds: int = 10) -> tuple[float, list[float]]:
    """The elephants' aggregate once pinned: iperf3's own per-second receive rates summed over the flows, the
    median second of the ``seconds`` from two polls after ``pinned_at_s`` (seconds since the flows started);
    returns (that median in Mb/s, the seconds it was taken from). Why not the controller's rates: one poll's
    byte counts lag the switch's traffic by up to its counter refresh, so a single 2-s rate swings by 20 %
    around the truth (k=8, disjoint paths throughout: 126.6 then 163.4 of 160 Mb/s in consecutive polls)."""
    start = int(pinned_at_s) + 2 * POLL_S
    window = received_per_second(reports)[start:start + seconds]
    return (sorted(window)[len(window) // 2] if window else 0.0), window


def point_at(bridges, target):
    """Set the OpenFlow controller target of ``bridges`` (their Controller records keep every other setting):
    a dead target holds a switch back from reconnecting; the real one lets it connect at once."""
    for bridge in bridges:
        uuid = subprocess.run(["ovs-vsctl", "get", "Bridge", bridge, "controller"], capture_output=True, text=True,
                              check=True).stdout.strip().strip("[]")
        subprocess.run(["ovs-vsctl", "set", "Controller", uuid, f'target="{target}"'], check=True)
