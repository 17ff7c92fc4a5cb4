"""Checks shared by the forwarding integration tests."""

import time

from tests.integration.harness import ping_all, wait_until

CONVERGE_S = 30


def non_lldp_packet_ins(controller):
    return sum(controller.metric("mlroute_packet_in_total", {"kind": k}) for k in ("arp", "ipv4", "other"))


def assert_pingall_converges(fab):
    loss = wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=CONVERGE_S - fab.elapsed(), interval=0)
    assert loss, f"pingall still losing packets {fab.elapsed():.0f}s after start:\n{fab.controller.log()[-3000:]}"
    assert ping_all(fab.net) == 0, "second pingall lost packets"


def assert_quiet_first_minute(fab):
    time.sleep(max(0.0, 60 - fab.elapsed()))
    count = non_lldp_packet_ins(fab.controller)
    assert count < 1000, f"{count} packet-ins in the first 60 s: a storm"
