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


# ARP announcements (gratuitous requests) from the attacker's interface, each claiming another address 10.9.x.y
# with another MAC, as fast as the host can send them
FORGE_HOSTS = r"""
import socket, struct, sys, time
iface, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
for n in range(count):
    mac = bytes([2, 0, 0, 9, n >> 8, n & 255])
    ip = bytes([10, 9, n >> 8, n & 255])
    frame = b"\xff" * 6 + mac + b"\x08\x06" + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, ip, bytes(6), ip)
    while True:
        try:
            s.send(frame)
            break
        except OSError:  # the interface's queue is full: wait for it
            time.sleep(0.001)
print(count)
"""
