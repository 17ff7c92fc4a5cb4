"""Debian's real Prometheus with the repository's deploy/prometheus/prometheus.yml, its target pointed at a real
controller on a Mininet leaf-spine: the target is up, mlroute_ metrics are scraped (one link-utilisation series per
directed fabric link, a loaded link seen loaded), and every Grafana dashboard query runs on the scraped data."""

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from mininet_topos.leafspine import LeafSpineTopo
from mlroute.experiment.traffic import Iperf3Flows
from tests.integration.harness import ROOT, free_port, ping_all, wait_until
from tests.integration.tools import required_binary, terminate

CONFIG = """
te:
  poll_interval_s: 1
  host_link_mbps: 10
"""


class Prometheus:
    """``prometheus`` on a free loopback port with the repository's configuration, scraping ``target``."""

    def __init__(self, workdir: Path, target: str):
        config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
        for job in config["scrape_configs"]:
            for static in job["static_configs"]:
                static["targets"] = [target]
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [required_binary("prometheus"), f"--config.file={self.config_path}",
             f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read().decode())

    def query(self, expr):
        answer = self.api("/api/v1/query", query=expr)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expr):
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            assert self.proc.poll() is None, self.log_path.read_text()[-2000:]
            return False

    def stop(self):
        terminate(self.proc)
        self._log.close()


@pytest.fixture(scope="module")
def scraped(fabric_factory, tmp_path_factory):
    required_binary("prometheus")
    fab = fabric_factory(LeafSpineTopo(spines=2, leaves=2, hosts_per_leaf=1, bw=10), CONFIG)
    assert wait_until(lambda: ping_all(fab.net) == 0 or None, timeout=30, interval=0)
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"), f"127.0.0.1:{fab.controller.rest_port}")
    try:
        assert wait_until(prom.ready, timeout=30), prom.log_path.read_text()[-2000:]
        yield fab, prom
    finally:
        prom.stop()


def test_the_controller_target_is_up_and_its_metrics_are_scraped(scraped):
    fab, prom = scraped
    assert wait_until(lambda: prom.value('up{job="mlroute"}') == 1, timeout=20), prom.api("/api/v1/targets")
    (target,) = prom.api("/api/v1/targets")["data"]["activeTargets"]
    assert target["health"] == "up" and target["lastError"] == ""
    assert target["scrapeUrl"] == fab.controller.url("/metrics")
    names = {r["metric"]["__name__"] for r in prom.query('{__name__=~"mlroute_.+"}')}
    assert {"mlroute_elephants", "mlroute_rules_installed", "mlroute_max_link_load", "mlroute_ecmp_max_link_load",
            "mlroute_rule_changes_total", "mlroute_packet_in_total", "mlroute_link_utilisation"} <= names, names
    assert prom.value("mlroute_rules_installed") > 0
    assert prom.value('sum(mlroute_packet_in_total{kind="lldp"})') > 0


def test_one_utilisation_series_per_directed_fabric_link_and_a_loaded_link_seen_loaded(scraped):
    fab, prom = scraped
    directed = {(link["src"], link["dst"]) for link in fab.controller.get("/mlroute/topology")["links"]}
    assert len(directed) == 8  # 2 spines x 2 leaves, both directions
    flows = Iperf3Flows(fab.net, [("h1", "h2")], seconds=15, base_port=6100)
    try:
        busy = wait_until(lambda: (v := prom.value("max(mlroute_link_utilisation)")) and v > 0.5 and v,
                          timeout=20)
        assert busy, prom.query("mlroute_link_utilisation")
        series = prom.query("mlroute_link_utilisation")
        assert {(int(s["metric"]["src"]), int(s["metric"]["dst"])) for s in series} == directed
        loaded = [s for s in series if float(s["value"][1]) > 0.5]
        print(f"\nlink utilisation scraped: {sorted(round(float(s['value'][1]), 3) for s in series)}")
        assert len(loaded) == 2  # h1 -> leaf -> spine -> leaf -> h2: two directed fabric links
    finally:
        flows.results_mbps()


def test_every_grafana_dashboard_query_runs_on_the_scraped_data(scraped):
    _, prom = scraped
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "mlroute.json").read_text())
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            if not prom.query(target["expr"]):  # query() asserts Prometheus accepted the expression
                empty.append(target["expr"])
    # increase()/rate() need two samples of a series; gauges and counters already scraped must answer
    assert not [e for e in empty if not e.startswith(("increase(", "rate(", "sum by"))], empty
