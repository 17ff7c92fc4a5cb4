from controller.desired import forwarding
from controller.desired.rules import Change, FlowRule, GroupRule, SwitchRules, diff_switch, match
from tests import topologies


def test_identical_states_need_no_changes():
    plan = forwarding.plan(topologies.fat_tree(4))
    assert all(diff_switch(rules, rules) == [] for rules in plan.values())


def test_fresh_switch_gets_groups_before_the_flows_that_use_them():
    plan = forwarding.plan(topologies.fat_tree(4))
    changes = diff_switch(SwitchRules(), plan[1000])
    kinds = [type(c.rule).__name__ for c in changes]
    assert kinds.index("FlowRule") > max(i for i, k in enumerate(kinds) if k == "GroupRule")
    assert all(c.op == "add" for c in changes)


def test_removed_group_is_deleted_after_the_flow_that_used_it():
    old, new = SwitchRules(), SwitchRules()
    old.add_group(GroupRule(1, 7, (1, 2)))
    old.add_flow(FlowRule(1, 10, match(ipv4_dst="10.0.0.1"), (("group", 7),)))
    new.add_flow(FlowRule(1, 10, match(ipv4_dst="10.0.0.1"), (("output", 1),)))
    changes = diff_switch(old, new)
    assert [c.op for c in changes] == ["modify", "delete"]
    assert isinstance(changes[1].rule, GroupRule)


def test_changed_group_is_modified_not_recreated():
    old, new = SwitchRules(), SwitchRules()
    old.add_group(GroupRule(1, 7, (1, 2)))
    new.add_group(GroupRule(1, 7, (1,)))
    assert diff_switch(old, new) == [Change("modify", GroupRule(1, 7, (1,)))]
