"""A controller cluster as the switches and the nodes' REST report it: who leads, each bridge's roles (read from
Open vSwitch: ``ovs-vsctl list Controller``, each connection's ``role``). Shared by the cluster scenarios and
benchmarks/bench_takeover.py."""

import json
import subprocess
import time


def cluster(ctl, timeout=10):
    """The node's ``GET /mlroute/cluster``; None when its process is gone or does not answer within ``timeout``
    seconds (a paused one)."""
    try:
        return ctl.get("/mlroute/cluster", timeout=timeout) if ctl.proc.poll() is None else None
    except OSError:
        return None


def leader(fab):
    """The controller that says it leads and is writable on every switch of the fabric (None if none is yet)."""
    for ctl in fab.controllers:
        view = cluster(ctl)
        if view and view["role"] == "leader" and len(view["switches"]) == len(fab.net.switches) \
                and all(s["writable"] for s in view["switches"].values()):
            return ctl
    return None


def switch_roles():
    """bridge -> {OpenFlow port of the controller: (role, connected)} as Open vSwitch reports it."""
    def table(*args):
        out = json.loads(subprocess.run(["ovs-vsctl", "--format=json", *args], capture_output=True, text=True,
                                        check=True).stdout)
        return [dict(zip(out["headings"], row)) for row in out["data"]]

    rows = {r["_uuid"][1]: r for r in table("--columns=_uuid,target,role,is_connected", "list", "Controller")}
    roles = {}
    for bridge in table("--columns=name,controller", "list", "Bridge"):
        refs = bridge["controller"]
        uuids = [refs[1]] if refs[0] == "uuid" else [u[1] for u in refs[1]]
        roles[bridge["name"]] = {int(rows[u]["target"].rsplit(":", 1)[1]): (rows[u]["role"], rows[u]["is_connected"])
                                 for u in uuids if u in rows}
    return roles


def masters_of(roles, bridges):
    """bridge -> OpenFlow ports of the controllers it holds as MASTER, for ``bridges`` only."""
    return {b: {p for p, (role, _) in conns.items() if role == "master"} for b, conns in roles.items()
            if b in bridges}


def masters(roles, fab):
    """``masters_of`` the fabric's bridges."""
    return masters_of(roles, {sw.name for sw in fab.net.switches})


def confirmed_master(ctl, switches=20):
    """Every switch answered ``ctl``'s role request: MASTER at its generation (its own REST view)."""
    view = cluster(ctl)
    return bool(view) and len(view["switches"]) == switches and all(
        s["role"] == "master" and s["generation"] == view.get("generation") for s in view["switches"].values())


def all_master(fab, ctl):
    """Open vSwitch holds ``ctl`` as the only MASTER of every bridge of the fabric."""
    m = masters(switch_roles(), fab)
    return len(m) == len(fab.net.switches) and all(ports == {ctl.of_port} for ports in m.values())


def logged_at(ctl, text, after):
    """When (epoch seconds) the node's log first says ``text`` after ``after``, read from the harness's stamp of
    each line (local HH:MM:SS.mmm); None if it has not."""
    day = time.localtime(after)
    for line in ctl.log().splitlines():
        if len(line) < 13 or line[2] != ":" or line[12] != " " or text not in line:
            continue
        try:
            clock = time.strptime(line[:8], "%H:%M:%S")
        except ValueError:
            continue
        when = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, clock.tm_hour, clock.tm_min, clock.tm_sec, 0, 0,
                            -1)) + int(line[9:12]) / 1000
        if when < after - 12 * 3600:  # (past midnight since ``after``)
            when += 24 * 3600
        if when >= after:
            return when
    return None
