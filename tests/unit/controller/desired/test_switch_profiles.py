"""Switch profiles: which profile a switch gets, bad entries named by key and line, and the app applying a
profile's table capacity, flow-mod pacing, counter interval and copy policy over fake switches."""

import pytest

from controller import config
from controller.desired import switch_profiles
from controller.desired.rules import COOKIE_FLOW_MISS, TABLE_SEEN
from tests import topologies
from tests.clock import FakeClock
from tests.fakeswitch import FakeSwitch
from tests.lab import Lab, stop_apps

ENTRIES = [switch_profiles.entry_from({"dpid": 7, "profile": "aruba", "max_flow_mods_per_s": 20}),
           switch_profiles.entry_from({"description": "zodiac", "profile": "zodiac-fx"})]


def test_a_switch_gets_the_first_entry_that_matches_else_a_profile_by_its_description():
    assert switch_profiles.resolve(ENTRIES, 7, "Northbound Networks", "Zodiac FX").name == "aruba+"
    assert switch_profiles.resolve(ENTRIES, 8, "Northbound Networks", "Zodiac FX", "0.86").name == "zodiac-fx"
    assert switch_profiles.resolve(ENTRIES, 9, "Nicira, Inc.", "Open vSwitch").name == "open-vswitch"
    assert switch_profiles.resolve(ENTRIES, 9, "Brand X", "9000").name == "generic-of13"
    aruba = switch_profiles.resolve(ENTRIES, 7, "", "")
    assert aruba.max_flow_mods_per_s == 20 and aruba.table_capacity == {0: 100, 1: 100, 2: 50}


def test_every_shipped_profile_names_itself_and_keeps_idle_floors_under_the_default_idle_timeout():
    idle = config.DEFAULTS["te"]["flow_idle_timeout_s"]
    for name, profile in switch_profiles.SHIPPED.items():
        assert profile.name == name and profile.min_idle_timeout_s <= idle


@pytest.mark.parametrize("text, error", [
    ("switches: {dpid: 1}\n", "x.yaml:1: switches: must be a list"),
    ("switches:\n  - dpid: 1\n    colour: red\n", "x.yaml:3: switches[0].colour: unknown key"),
    ("switches:\n  - profile: aruba\n", "x.yaml:2: switches[0]: needs dpid or description"),
    ("switches:\n  - dpid: 1\n  - dpid: 2\n    profile: cisco\n", "x.yaml:4: switches[1].profile: must be one of"),
    ("switches:\n  - description: '('\n", "x.yaml:2: switches[0].description: not a regular expression"),
    ("switches:\n  - dpid: 1\n    table_capacity: {0: -1}\n", "x.yaml:3: switches[0].table_capacity: must map"),
    ("switches:\n  - dpid: 0xZZ\n", "x.yaml:2: switches[0].dpid: must be an integer"),
    ("switches:\n  - dpid: 1\n    max_flow_mods_per_s: fast\n", "x.yaml:3: switches[0].max_flow_mods_per_s"),
    ("switches:\n  - dpid: 1\n    groups: fast_failover\n", "x.yaml:3: switches[0].groups: must be select or none"),
    ("te:\n  flow_idle_timeout_s: 5\nswitches:\n  - dpid: 1\n    profile: catalyst-9300\n",
     "x.yaml:4: switches[0]: its profile's min_idle_timeout_s (10 s) is above te.flow_idle_timeout_s (5 s)"),
])
def test_a_bad_entry_is_named_by_file_line_and_key(text, error):
    with pytest.raises(config.ConfigError) as exc:
        config.parse(text, "x.yaml")
    assert str(exc.value).startswith(error), str(exc.value)


# -- the app ---------------------------------------------------------------------------------------------------
EDGE = 1000


def profiled_lab(tmp_path, monkeypatch, text):
    path = tmp_path / "mlroute.yaml"
    path.write_text(text)
    monkeypatch.setenv("MLROUTE_CONFIG", str(path))
    ref = topologies.fat_tree(4)
    switches = {d: FakeSwitch(d) for d in ref.ports}
    lab = Lab(ref, switches)
    clock = FakeClock(1000.0)
    lab.app.core.clock = clock
    return lab, clock


def test_a_profiles_table_capacity_is_planned_within_though_the_switch_says_more(tmp_path, monkeypatch):
    lab, _ = profiled_lab(tmp_path, monkeypatch, f"switches:\n  - dpid: {EDGE}\n    profile: open-vswitch\n"
                                                 "    table_capacity: {0: 16}\n")
    edge = lab.switches[EDGE]
    edge.table_limit = {0: 16}
    edge.reports_limit = False  # its table features say 1,000,000
    try:
        lab.bring_up()
        lab.pump()
        lab.app.resync()
        core = lab.app.core
        assert edge.errors_sent == 0 and sum(1 for r in edge.table.flows.values() if r.table == 0) <= 15
        assert core.belief.over_budget[EDGE] and core.installed[EDGE].flows == edge.table.flows
        view = next(s for s in core.switches_json() if s["dpid"] == EDGE)
        assert view["profile"]["name"] == "open-vswitch+" and view["profile"]["table_capacity"] == {"0": 16}
    finally:
        stop_apps()


def test_a_paced_switch_gets_its_first_install_in_order_at_its_rate_and_polls_at_its_interval(tmp_path,
                                                                                             monkeypatch):
    lab, clock = profiled_lab(tmp_path, monkeypatch, f"switches:\n  - dpid: {EDGE}\n    profile: zodiac-fx\n"
                                                     "    max_flow_mods_per_s: 10\n    table_capacity: {}\n"
                                                     "    stats_interval_s: 5\n")
    waits = []
    real_sleep = lab.app.core.pace

    def pace(dpid):  # the shell sleeps what pace says: here the fake clock moves instead
        wait = real_sleep(dpid)
        if wait > 0:
            waits.append((dpid, wait))
            clock.advance(wait)
        return wait
    lab.app.core.pace = pace
    try:
        lab.bring_up()
        core, edge = lab.app.core, lab.switches[EDGE]
        mods = edge.flow_mods
        assert mods > 20 and {d for d, _ in waits} == {EDGE}, "only the paced switch waits"
        assert sum(w for _, w in waits) == pytest.approx((mods - 1) / 10, abs=0.2), "rules / rate"
        assert not any(r.table == TABLE_SEEN for r in edge.table.flows.values()), "zodiac-fx: plain copies"
        assert any(r.cookie == COOKIE_FLOW_MISS for r in edge.table.flows.values())
        assert EDGE in core.stats_switches()  # polled now ...
        for _ in range(2):  # polls every 2 s
            clock.advance(core.config["te"]["poll_interval_s"])
            due = core.stats_switches()
            assert EDGE not in due and 1001 in due, "... its counters every 5 s at most"
        clock.advance(1)
        assert EDGE in core.stats_switches()
    finally:
        stop_apps()
