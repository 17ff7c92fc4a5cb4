"""A switch whose table refuses rules, with the real controller, Open vSwitch and Mininet: what the controller
believes the switches hold is what they hold (issue 20's measurement: Open vSwitch `flow_limit` with
`overflow_policy=refuse` on one edge switch's table 0; before, the refused rules were logged as two integers
and counted in `mlroute_rules_installed` as if installed)."""

import subprocess
import time

from controller.rules import COOKIE_BASE, COOKIE_ELEPHANT, COOKIE_FLOW, COOKIE_FLOW_MISS
from mininet_topos.fattree import FatTreeTopo
from tests.integration.flowtables import dump_flows
from tests.integration.harness import ping_all, point_at, te_config, wait_until

OURS = {COOKIE_BASE, COOKIE_ELEPHANT, COOKIE_FLOW, COOKIE_FLOW_MISS}  # what the controller installs
EDGE, LIMIT = "e0_0", 9


def test_rules_a_full_table_refuses_are_not_believed_installed(fabric_factory):
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), te_config())
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    ctl = fab.controller
    assert ctl.metric("mlroute_openflow_errors_total") == 0
    # the edge switch loses its controller and its tables, and comes back with room for 9 entries in table 0
    point_at([EDGE], "tcp:127.0.0.1:9")
    time.sleep(1)
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", EDGE], check=True)
    subprocess.run(["ovs-vsctl", "--", "--id=@t", "create", "Flow_Table", f"flow_limit={LIMIT}",
                    "overflow_policy=refuse", "--", "set", "Bridge", EDGE, "flow_tables:0=@t"], check=True)
    point_at([EDGE], f"tcp:127.0.0.1:{ctl.of_port}")
    full = {"type": "FLOW_MOD_FAILED", "code": "TABLE_FULL"}
    assert wait_until(lambda: ctl.metric("mlroute_openflow_errors_total", full) > 0 or None, timeout=20), \
        ctl.log()[-3000:]

    def believed_and_held():
        held = sum(sum(1 for r in dump_flows(sw.name) if r["cookie"] in OURS) for sw in fab.net.switches)
        return ctl.metric("mlroute_rules_installed"), held
    assert wait_until(lambda: (b := believed_and_held())[0] == b[1] or None, timeout=10), believed_and_held()
    edge_table0 = [r for r in dump_flows(EDGE) if r["table"] == 0]
    refused = ctl.metric("mlroute_rules_refused")
    print(f"{EDGE}: {len(edge_table0)} entries in table 0 (limit {LIMIT}), {refused:.0f} rule changes refused "
          f"and held back, {ctl.metric('mlroute_openflow_errors_total', full):.0f} TABLE_FULL errors; the "
          f"controller's rule count equals the switches' ({believed_and_held()[0]:.0f})")
    assert len(edge_table0) == LIMIT and refused > 0
    log = ctl.log()
    assert "switch 1000 refused add" in log and "FLOW_MOD_FAILED/TABLE_FULL" in log and "Traceback" not in log
    subprocess.run(["ovs-vsctl", "clear", "Bridge", EDGE, "flow_tables"], check=True)
