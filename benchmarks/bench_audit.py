#!/usr/bin/env python3
"""What the table audit costs the event loop, and how long a full round over a large fabric takes.

    python benchmarks/bench_audit.py              # fat-tree k = 8, 16, 24
    python benchmarks/bench_audit.py --k 4 --k 8  # smaller

For the fullest switch of each fabric (its forwarding plan, ``sync.desired_state``): every rule as the bytes
the controller sends (``ofmsg.compile_change``), parsed back by the framework's OpenFlow parser into rule values
(``ofmsg.rule_from_stats``: what a read-back does with each flow-stats entry; a flow-mod carries the same
match and instructions), then ``audit.compare`` against the belief. Printed per entry, as a ratio to the
baseline measured in the same run (diffing the same switch against itself with ``rules.diff_switch``, what a
no-op resync of it costs), as the share of one core the default budget (``audit.entries_per_s``) spends, and
as the time one round over every switch of the fabric takes within that budget (the effective audit period
on such a fabric; the table-stats check still finds a wiped table within a poll).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.config import DEFAULTS  # noqa: E402
from controller.desired import audit, sync  # noqa: E402
from controller.desired.rules import Change, SwitchRules, diff_switch  # noqa: E402
from controller.southbound import ofmsg  # noqa: E402
from controller.southbound.framework import ofproto_parser  # noqa: E402
from controller.state.tiers import infer_tiers  # noqa: E402
from tests import topologies  # noqa: E402
from tests.fakeswitch import OFP, FakeSwitch  # noqa: E402


def cpu(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def run(k: int) -> None:
    topo = topologies.fat_tree(k)
    tiers = infer_tiers(topo.graph(), topo.access_switches())
    desired = sync.desired_state(topo, tiers, {}, {}, stagger=True, idle_timeout=10)
    dpid, rules = max(desired.items(), key=lambda item: len(item[1].flows))
    dp = FakeSwitch(dpid)
    wire = []
    for rule in rules.flows.values():
        msg = ofmsg.compile_change(dp, Change("add", rule))
        dp.set_xid(msg)
        msg.serialize()
        wire.append((msg.msg_type, msg.msg_len, msg.xid, bytes(msg.buf)))

    def read_back():
        held = SwitchRules()
        for msg_type, msg_len, xid, buf in wire:
            held.add_flow(ofmsg.rule_from_stats(dpid, ofproto_parser.msg(dp, OFP.OFP_VERSION, msg_type, msg_len,
                                                                          xid, buf)))
        return held
    held = read_back()
    assert held.flows == rules.flows, "read back as sent"
    n = len(rules.flows) + len(rules.groups)
    parse_s = cpu(read_back)
    compare_s = cpu(lambda: audit.compare(rules, held))
    baseline_s = cpu(lambda: diff_switch(rules, rules))
    per_entry = (parse_s + compare_s) / n
    budget = DEFAULTS["audit"]["entries_per_s"]
    total = sum(len(r.flows) + len(r.groups) for r in desired.values())
    print(f"fat-tree k={k:>2}: {len(desired):4d} switches, {total:9,d} entries; fullest switch {n:6,d} entries: "
          f"read back {1e6 * parse_s / n:5.1f} us/entry, compared {1e6 * compare_s / n:4.2f} us/entry "
          f"({(parse_s + compare_s) / baseline_s:5.1f}x a no-op diff of it); at {budget:,} entries/s: "
          f"{100 * per_entry * budget:4.1f} % of a core, one round over the fabric {total / budget:7.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, action="append", help="fat-tree k (repeatable; default 8, 16, 24)")
    for k in parser.parse_args().k or [8, 16, 24]:
        run(k)


if __name__ == "__main__":
    main()
