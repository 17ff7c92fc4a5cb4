"""The monitoring files (deploy/prometheus/prometheus.yml, deploy/grafana/mlroute.json, the compose `monitoring`
profile) agree with the metrics the controller really exports and with each other. The real Prometheus scraping
a real controller is tests/integration/test_prometheus.py."""

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from controller import config as mlconfig
from controller.web.metrics import Metrics

ROOT = Path(__file__).resolve().parents[1].parent
PROMETHEUS_YML = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "mlroute.json"
PROMQL_WORDS = {"increase", "rate", "sum", "by", "topk", "avg", "max", "min", "count", "histogram_quantile", "le"}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")  # a histogram's samples


def exported_names():
    """Sample names a scrape of the controller can contain (counters as name_total)."""
    text = Metrics().exposition()[0].decode()
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        if kind == "counter" and not name.endswith("_total"):
            name += "_total"
        if not name.endswith("_created"):  # prometheus_client's creation timestamps: nothing to chart
            names.add(name)
    return names


def dashboard_exprs():
    return [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]


def test_every_dashboard_query_uses_only_metrics_the_controller_exports():
    names = exported_names()
    used = set()
    for expr in dashboard_exprs():
        for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r"\{[^}]*\}|\[[^]]*\]", "", expr)):
            if word not in PROMQL_WORDS and not word.isdigit() and word not in ("kind",):
                word = next((word[:-len(x)] for x in HISTOGRAM_SERIES
                             if word.endswith(x) and word[:-len(x)] in names), word)
                assert word in names, f"dashboard query {expr!r} uses {word}, which the controller does not export"
                used.add(word)
    assert used == {n for n in names if n.startswith("mlroute_")}, "every exported metric is on the dashboard"


def test_the_dashboard_shows_what_the_issue_asks_for_in_a_valid_layout():
    dash = json.loads(DASHBOARD.read_text())
    text = json.dumps(dash)
    for needle in ("mlroute_elephants", "mlroute_reoptimisations_total", "mlroute_max_link_load",
                   "mlroute_ecmp_max_link_load", "mlroute_optimiser_seconds", "mlroute_packet_in_total",
                   "mlroute_rule_changes_total", "mlroute_link_utilisation"):
        assert needle in text
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & area, f"panel {p['title']!r} overlaps another"
        cells |= area
        assert p["datasource"]["uid"] == "${datasource}"
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource"]


def test_prometheus_scrapes_the_compose_controller_where_its_rest_listens():
    prom = yaml.safe_load(PROMETHEUS_YML.read_text())
    (job,) = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert host in compose["services"]
    docker_cfg = mlconfig.load(str(ROOT / "examples" / "mlroute.docker.yaml"))
    assert int(port) == docker_cfg["rest"]["port"] and docker_cfg["rest"]["host"] == "0.0.0.0"
    service = compose["services"]["prometheus"]
    assert service["profiles"] == ["monitoring"] and host in service["depends_on"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in service["volumes"]}
    assert mounts["./deploy/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert "/etc/prometheus/prometheus.yml" in (ROOT / "Dockerfile").read_text()
    assert all(str(p).startswith("127.0.0.1:") for p in service["ports"])


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian's prometheus package) not installed")
def test_promtool_accepts_the_configuration():
    done = subprocess.run(["promtool", "check", "config", str(PROMETHEUS_YML)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _sample(metrics, name):
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name:
                return s.value
    return None


def test_the_ecmp_estimate_is_read_from_the_routing_view_at_scrape_time():
    metrics = Metrics()
    view = {"ecmp": None}
    metrics.estimate_ecmp_from(lambda: view)
    assert _sample(metrics, "mlroute_ecmp_max_link_load") == 0
    view["ecmp"] = {"max_link_load": 3}
    assert _sample(metrics, "mlroute_ecmp_max_link_load") == 3

    def broken():
        raise RuntimeError("fabric changed under the estimate")
    metrics.estimate_ecmp_from(broken)
    assert math.isnan(_sample(metrics, "mlroute_ecmp_max_link_load"))
    assert b"mlroute_ecmp_max_link_load NaN" in metrics.exposition()[0]


def test_the_controller_process_reports_its_own_cpu_and_memory():
    text = Metrics().exposition()[0].decode()
    cpu = [line for line in text.splitlines() if line.startswith("process_cpu_seconds_total ")]
    assert len(cpu) == 1 and float(cpu[0].split()[1]) > 0
    assert "process_resident_memory_bytes " in text
