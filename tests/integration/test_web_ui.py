"""The web view in a real browser: the real controller on a Mininet k=4 fat-tree with 8 iperf3 elephants, the
page opened in Debian's headless Chromium, and the DOM it rendered checked against the controller's REST views
(every switch and directed link drawn, each elephant's pinned path highlighted, loaded links above idle ones).

Set MLROUTE_SCREENSHOT=docs/img/web-ui.png to refresh the README's screenshot from this run.
"""

import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mininet_topos.fattree import FatTreeTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.harness import POLL_S, STRIDE4, ping_all, te_config, wait_until
from tests.integration.tools import CHROMIUM_FLAGS, DevTools, Dom, required_binary, run_chromium

CONFIG = te_config(extra="""rest:
  token: secret
jobs:
  - name: ring-a
    hosts: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]
  - name: ring-b
    hosts: [10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8]
""")
def key_of(e):
    return f"{e['src_ip']}:{e['src_port']}->{e['dst_ip']}:{e['dst_port']}/{'udp' if e['proto'] == 17 else 'tcp'}"


@pytest.fixture(scope="module")
def loaded_fabric(fabric_factory):
    """The fat-tree with 8 stride-4 elephants pinned, their links measured loaded by port stats."""
    required_binary("chromium")
    fab = fabric_factory(FatTreeTopo(k=4, bw=10), CONFIG, jumbo=True)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    yield from loaded(fab)


def loaded(fab):
    """Yield ``fab`` while 8 stride-4 elephants run on it, pinned, their links measured loaded by port stats
    (also the os-ken subset's, tests/integration/test_os_ken.py)."""
    flows = Iperf3Flows(fab.net, STRIDE4, seconds=40)
    try:
        pinned = wait_until(lambda: (e := fab.controller.get("/mlroute/elephants")) and len(e) == 8
                            and all(x["path"] for x in e) and e, timeout=5 * POLL_S)
        assert pinned, f"elephants not all pinned: {fab.controller.get('/mlroute/elephants')}"

        def settled():  # two polls after the last move: every pinned link measured loaded
            links = fab.controller.get("/mlroute/links")
            carrying = [link for link in links if link["elephants"]]
            return carrying and all((link["utilisation"] or 0) > 0.2 for link in carrying) and links
        assert wait_until(settled, timeout=6 * POLL_S), fab.controller.get("/mlroute/links")
        yield fab
    finally:
        flows.stop()


def test_the_rendered_page_shows_the_fabric_its_load_and_every_elephant_path(loaded_fabric, tmp_path):
    fab = loaded_fabric
    url = fab.controller.url("/mlroute/ui")
    t0 = time.time()
    dom = Dom(run_chromium(url, tmp_path / "profile", "--dump-dom"))
    render_s = time.time() - t0
    topology = fab.controller.get("/mlroute/topology")
    elephants = fab.controller.get("/mlroute/elephants")
    links = fab.controller.get("/mlroute/links")

    body = dom.find("body")[0]
    assert body["data-state"] == "ready" and int(body["data-refreshes"]) >= 2, body

    # every switch and every directed link, as the controller knows them
    drawn_switches = {int(g["data-dpid"]) for g in dom.find("g", "switch")}
    assert drawn_switches == {s["dpid"] for s in topology["switches"]} and len(drawn_switches) == 20
    drawn_links = {(int(lnk["data-src"]), int(lnk["data-src-port"]), int(lnk["data-dst"]), int(lnk["data-dst-port"]))
                   for lnk in dom.find("line", "link")}
    assert drawn_links == {(link["src"], link["src_port"], link["dst"], link["dst_port"]) for link in topology["links"]}
    assert len(drawn_links) == 64
    assert {g["data-tier"] for g in dom.find("g", "switch")} == {"core", "aggregation", "edge"}
    assert len(dom.find("g", "host")) == 16

    # each elephant's pinned path highlighted, with its 5-tuple, rate, demand and job on hover
    paths = {p["data-key"]: p for p in dom.find("path", "elephant-path")}
    assert len(paths) == 8
    for e in elephants:
        p = paths[key_of(e)]
        assert [int(d) for d in p["data-path"].split(",")] == e["path"]
        assert f"{e['src_ip']}:{e['src_port']}" in p["title"] and "Mb/s" in p["title"]
        assert "job ring-" in p["title"] and "demand" in p["title"]

    # utilisation: links under elephants drawn above the idle ones (colour, width and data-util)
    util = {(int(lnk["data-src"]), int(lnk["data-src-port"])): lnk for lnk in dom.find("line", "link")}
    loaded = [util[(link["src"], link["src_port"])] for link in links if link["elephants"]]
    idle = [util[(link["src"], link["src_port"])] for link in links if not link["elephants"]]
    loaded_u = [float(link["data-util"]) for link in loaded]
    idle_u = [float(link["data-util"] or 0) for link in idle]
    print(f"\nrender {render_s:.1f} s; loaded links {len(loaded)}: utilisation {min(loaded_u):.3f}-"
          f"{max(loaded_u):.3f}; idle links {len(idle)}: max {max(idle_u):.3f}")
    assert len(loaded) == 8 * 4  # 8 cross-pod elephants, 4 fabric hops each, no link shared
    # 8 TCP flows share the CPU-bound emulation unevenly (0.31-1.00 seen); idle links carry LLDP and ACKs only
    assert min(loaded_u) > 0.15 and max(idle_u) < 0.1 and min(loaded_u) > 5 * max(idle_u)
    assert min(float(link["stroke-width"]) for link in loaded) > max(float(link["stroke-width"]) for link in idle)
    assert all(int(link["data-elephants"]) == 1 for link in loaded)

    # panels: installed routing next to ECMP's estimate, the last decision, jobs with their slowest flow
    routing = dom.find("table", id="routing")[0]
    assert routing["data-installed-max"] == "1" and int(routing["data-ecmp-max"]) >= 1
    decision = dom.find("table", id="decision")[0]
    assert decision["data-after"] == "1" and int(decision["data-before"]) >= 1
    job_rows = [r for r in dom.find("tr") if r.get("data-job")]
    assert sorted(r["data-job"] for r in job_rows) == ["ring-a", "ring-b"]
    assert all(float(r["data-slowest-bps"]) > 1e6 for r in job_rows)
    assert len(dom.find("tr", data_key=key_of(elephants[0]))) == 1
    # every switch's table fill against its capacity (table stats and table features)
    switch_rows = [r for r in dom.find("tr") if r.get("data-dpid")]
    assert {int(r["data-dpid"]) for r in switch_rows} == drawn_switches
    fills = [c for c in dom.find("td") if c.get("data-table") == "1"]
    assert len(fills) == 20 and all(int(c["data-entries"]) > 0 and int(c["data-capacity"]) == 1_000_000
                                    for c in fills)
    # no token typed: the mutating buttons are off
    assert "disabled" in dom.find("button", id="recompute")[0]
    assert "disabled" in dom.find("button", id="switch-objective")[0]


def test_a_screenshot_of_the_loaded_fabric(loaded_fabric, tmp_path):
    shot = tmp_path / "web-ui.png"
    run_chromium(loaded_fabric.controller.url("/"), tmp_path / "profile", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a drawn page, not a blank one
    target = os.environ.get("MLROUTE_SCREENSHOT")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)


def test_the_page_and_the_objective_switch_over_rest(loaded_fabric):
    ctl = loaded_fabric.controller
    for path, kind in (("/", "text/html"), ("/mlroute/ui/app.js", "text/javascript"),
                       ("/mlroute/ui/style.css", "text/css")):
        with urllib.request.urlopen(ctl.url(path), timeout=10) as r:
            assert r.headers["Content-Type"].startswith(kind) and r.read()
    for path in ("/mlroute/ui/..%2Fwebui.py", "/mlroute/ui/missing.js"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(ctl.url(path), timeout=10)
        assert err.value.code == 404
    assert ctl.get("/mlroute/ui-config")["mutations_enabled"] is True
    with pytest.raises(urllib.error.HTTPError) as err:
        ctl.post("/mlroute/objective", {"objective": "job"})
    assert err.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as err:
        ctl.post("/mlroute/objective", {"objective": "fastest"}, token="secret")
    assert err.value.code == 400
    assert ctl.post("/mlroute/objective", {"objective": "job"}, token="secret") == {"objective": "job"}
    assert ctl.get("/mlroute/ui-config")["objective"] == "job"
    assert ctl.post("/mlroute/objective", {"objective": "flow"}, token="secret") == {"objective": "flow"}


def test_hover_hosts_and_the_token_gated_buttons_in_the_live_page(loaded_fabric, tmp_path):
    """Driven over the DevTools protocol: what a user does with the page, and what the controller answers."""
    page = DevTools(required_binary("chromium"), loaded_fabric.controller.url("/mlroute/ui"), tmp_path / "p",
                    CHROMIUM_FLAGS)

    def until(expression, timeout=15):
        return wait_until(lambda: page.evaluate(expression), timeout=timeout, interval=0.2)

    def by_id(element_id):
        return f"document.getElementById('{element_id}')"

    def click(element_id):  # clears the answer line first, so the next answer is the button's
        page.evaluate(f"{by_id('action-result')}.textContent = '', {by_id(element_id)}.click()")

    def type_token(token):
        page.evaluate(f"{by_id('token')}.value = '{token}', {by_id('token')}.dispatchEvent(new Event('input'))")

    answer = f"{by_id('action-result')}.textContent"
    hosts = "document.querySelectorAll('g.host').length"
    try:
        assert until("document.body !== null && document.body.dataset.state === 'ready'")
        # hover over an elephant: its details in the tooltip, its row highlighted
        details = page.evaluate("""(() => {
            const p = document.querySelector('.elephant-path');
            p.dispatchEvent(new MouseEvent('mouseenter'));
            p.dispatchEvent(new MouseEvent('mousemove', {clientX: 200, clientY: 200}));
            const tip = document.getElementById('tooltip');
            const row = document.querySelector(`#elephants tr[data-key="${p.dataset.key}"]`);
            return {hidden: tip.hidden, text: tip.textContent, key: p.dataset.key,
                    row: row.classList.contains('hover')};
        })()""")
        src = details["key"].split("->")[0]
        assert not details["hidden"] and src in details["text"] and "job ring-" in details["text"], details
        assert details["row"]
        # hosts collapse and come back
        assert page.evaluate(f"{by_id('show-hosts')}.click(), {hosts}") == 0
        assert page.evaluate(f"{by_id('show-hosts')}.click(), {hosts}") == 16
        # buttons: off without a token, on with one; a wrong token is refused by the controller
        assert page.evaluate(f"{by_id('recompute')}.disabled") is True
        type_token("wrong")
        assert page.evaluate(f"{by_id('recompute')}.disabled") is False
        click("recompute")
        assert until(f"{answer}.startsWith('401')")
        type_token("secret")
        click("recompute")
        text = until(answer)
        assert text.startswith(("applied", "kept")) and "moved" in text, text
        page.evaluate(f"{by_id('objective')}.value = 'job'")
        click("switch-objective")
        assert until(f"{answer} === 'objective: job'")
        assert loaded_fabric.controller.get("/mlroute/ui-config")["objective"] == "job"
    finally:
        page.close()
        loaded_fabric.controller.post("/mlroute/objective", {"objective": "flow"}, token="secret")
