"""Issue 20's pacing target, live: a first install of about 2,000 rules on a switch whose profile takes 200
flow-mods/s completes without the connection dropping, in about rules / rate, in order.

Real ryu-manager and Open vSwitch, no Mininet: one bridge (userspace datapath, fail mode secure) with one port, a
veth whose other end sends gratuitous ARP for N hosts at once, three times 1 s apart (distinct addresses and
MACs, as a rack of VMs behind one port would; ``hosts.max_per_port`` raised to take them). The controller
learns them and plans each one's guard, copy and forwarding entries: several per host, about 2,000 in all for
340 hosts. Run twice in the same session: unpaced (Open vSwitch's profile) as the baseline, then with
``max_flow_mods_per_s: 200``. Printed per run: the rules the switch holds at the end (and whether the controller
believes the same), the time from the first ARP to the last rule, rules / rate, and how often the switch's
connection to the controller dropped.

Run as root after scripts/setup_env.sh, in flock /tmp/mininet.lock:
    .venv/bin/python benchmarks/bench_paced_install.py [--hosts 340] [--rate 200]
"""

import argparse
import socket
import struct
import subprocess
import sys
import tempfile
import time

from mlroute.experiment import emulation

BRIDGE, SWITCH_END, HOST_END = "pace0", "pacesw", "pacehost"
DPID = 0xAC00


def arp_frames(n):
    """Gratuitous ARP requests of hosts 10.77.x.1-250 (MAC 02:77:...), one per host."""
    frames = []
    for i in range(n):
        mac = bytes([0x02, 0x77, 0, 0, i >> 8, i & 0xFF])
        ip = socket.inet_aton(f"10.77.{i // 250}.{i % 250 + 1}")
        eth = b"\xff" * 6 + mac + struct.pack("!H", 0x0806)
        arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + b"\x00" * 6 + ip
        frames.append(eth + arp)
    return frames


def rules_held():
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", BRIDGE, "cookie=0x6d6c0000/0xffff0000"],
                         capture_output=True, text=True).stdout
    return int(out.split("flow_count=")[1].split()[0]) if "flow_count=" in out else 0


def run(hosts, rate, workdir):
    profile = "switches:\n  - description: \"Open vSwitch\"\n    profile: open-vswitch\n"
    if rate:
        profile += f"    max_flow_mods_per_s: {rate}\n"
    text = (f"te:\n  mode: ecmp\n  poll_interval_s: 2\nhosts:\n  max_per_port: {hosts + 10}\n"
            f"  new_per_port_burst: {hosts + 10}\n  new_per_port_per_s: 1000\n{profile}")
    ctl = emulation.Controller(workdir, text)
    try:
        ctl.wait_ready()
        subprocess.run(["ip", "link", "add", HOST_END, "type", "veth", "peer", "name", SWITCH_END], check=True)
        for end in (HOST_END, SWITCH_END):
            subprocess.run(["ip", "link", "set", end, "up"], check=True)
        subprocess.run(["ovs-vsctl", "--", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev",
                        "protocols=OpenFlow13", "fail_mode=secure", f"other_config:datapath-id={DPID:016x}",
                        "--", "add-port", BRIDGE, SWITCH_END, "--", "set", "Interface", SWITCH_END,
                        "ofport_request=1"], check=True)
        subprocess.run(["ovs-vsctl", "set-controller", BRIDGE, f"tcp:127.0.0.1:{ctl.of_port}"], check=True)
        emulation.wait_until(lambda: rules_held() > 0 or None, timeout=20, interval=0.1)
        time.sleep(3)  # the base rules in, LLDP quiet
        base = rules_held()
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sock.bind((HOST_END, 0))
        start = time.time()
        frames = arp_frames(hosts)
        for _ in range(3):  # announced three times, 1 s apart, as hosts re-ARP: a packet-in the switch's queue
            for frame in frames:  # dropped while the controller paced its flow-mods is heard the next time
                sock.send(frame)
            time.sleep(1.0)
        last, last_change, samples = base, time.time(), []
        while time.time() - last_change < 5 and time.time() - start < 120:  # until nothing changes for 5 s
            held = rules_held()
            if held != last:
                last, last_change = held, time.time()
            samples.append(held)
            time.sleep(0.1)
        log = ctl.log()
        drops = log.count(f"switch {DPID} disconnected")
        believed = ctl.metric("mlroute_rules_installed")
        return last - base, last_change - start, drops, believed == last, len(ctl.get("/mlroute/topology")["hosts"])
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE], check=False)
        subprocess.run(["ip", "link", "del", HOST_END], check=False, capture_output=True)
        ctl.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=340)
    parser.add_argument("--rate", type=float, default=200)
    args = parser.parse_args()
    problems = emulation.check_platform()
    if problems:
        sys.exit("; ".join(problems))
    print(f"{'profile':<22} {'hosts':>6} {'rules':>6} {'install':>9} {'rules/rate':>11} {'dropped':>8} belief=held")
    for rate in (None, args.rate):
        added, seconds, drops, agrees, hosts = run(args.hosts, rate, tempfile.mkdtemp())
        label = "unpaced (Open vSwitch)" if rate is None else f"{rate:g} flow-mods/s"
        ideal = f"{added / rate:9.1f} s" if rate else f"{'-':>11}"
        print(f"{label:<22} {hosts:>6} {added:>6} {seconds:7.1f} s {ideal:>11} {drops:>8} {agrees}")


if __name__ == "__main__":
    main()
