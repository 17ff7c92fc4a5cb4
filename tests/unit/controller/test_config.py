import pytest

from controller import config


def test_defaults_without_a_file(monkeypatch):
    monkeypatch.delenv("MLROUTE_CONFIG", raising=False)
    cfg = config.load()
    assert cfg["rest"]["host"] == "127.0.0.1" and cfg["te"]["mode"] == "mlroute"


def test_file_overrides_only_what_it_names(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("te:\n  mode: greedy\n  poll_interval_s: 0.5\ntiers:\n  0x10: core\n")
    monkeypatch.setenv("MLROUTE_CONFIG", str(path))
    cfg = config.load()
    assert cfg["te"]["mode"] == "greedy" and cfg["te"]["poll_interval_s"] == 0.5
    assert cfg["te"]["elephant_polls"] == config.DEFAULTS["te"]["elephant_polls"]
    assert cfg["tiers"] == {16: "core"}


@pytest.mark.parametrize("text, expected", [
    ("te:\n  mode: fastest\n", "c.yaml:2: te.mode: must be one of"),
    ("te:\n  poll_interval_s: -1\n", "c.yaml:2: te.poll_interval_s: must be in [0.1, 3600]"),
    ("te:\n  poll_interval_s: soon\n", "c.yaml:2: te.poll_interval_s: must be int or float"),
    ("te:\n  hysteresis: 1\n", "c.yaml:2: te.hysteresis: must be bool"),
    ("rest:\n  host: 127.0.0.1\n  prot: 80\n", "c.yaml:3: rest.prot: unknown key"),
    ("routing:\n  x: 1\n", "c.yaml:1: routing: unknown section"),
    ("te:\n  mode: ecmp\n  flow_copy: meter\n", "c.yaml:3: te.flow_copy: must be one of"),
    ("te: [1, 2\n", "c.yaml:2: not valid YAML"),
    ("jobs:\n  - name: a\n", "c.yaml:1: jobs[0]: needs name"),
])
def test_errors_name_the_line_and_the_key(text, expected):
    with pytest.raises(config.ConfigError) as err:
        config.parse(text, "c.yaml")
    assert str(err.value).startswith(expected)


def test_unreadable_file_is_a_clear_error(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(str(tmp_path / "missing.yaml"))


def test_the_example_file_documents_every_default():
    from pathlib import Path
    example = Path(__file__).resolve().parents[3] / "examples" / "mlroute.yaml"
    text = example.read_text()
    assert config.load(str(example)) == config.DEFAULTS
    for section in ("rest", "te", "sflow"):
        for key in config.DEFAULTS[section]:
            assert f"  {key}:" in text, f"{section}.{key} missing from examples/mlroute.yaml"


# -- issue 10: bad input gets a clear, line-precise error at start ------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("rest:\n  host: 'not a host!'\n", "c.yaml:2: rest.host: must be an IP address or a host name"),
    ("rest:\n  host: -bad-.example\n", "c.yaml:2: rest.host: must be an IP address or a host name"),
    ("rest:\n  host: ''\n", "c.yaml:2: rest.host: must be an IP address or a host name"),
    ("te:\n  flow_idle_timeout_s: 100000\n", "c.yaml:2: te.flow_idle_timeout_s: must be at most 65535"),
    ("te:\n  detection: netflow\n", "c.yaml:2: te.detection: must be one of flowstats, sflow, both, auto"),
    ("te:\n  detection: Auto\n", "c.yaml:2: te.detection: must be one of flowstats, sflow, both, auto"),
    ("sflow:\n  silent_s: 0.5\n", "c.yaml:2: sflow.silent_s: must be in [1, 3600]"),
    ("sflow:\n  silent_s: .nan\n", "c.yaml:2: sflow.silent_s: must be a finite number"),
    ("te:\n  detection: auto\n  elephant_polls: 4\nsflow:\n  windows: 3\n",
     "c.yaml:4: sflow.windows: must be at least te.elephant_polls (4)"),
    ("sflow:\n  port: 0\n", "c.yaml:2: sflow.port: must be a TCP port"),
    ("sflow:\n  host: 'no such host!'\n", "c.yaml:2: sflow.host: must be an IP address or a host name"),
    ("sflow:\n  window_s: 0\n", "c.yaml:2: sflow.window_s: must be in [0.1, 60]"),
    ("sflow:\n  sampling: 64\n", "c.yaml:2: sflow.sampling: unknown key"),
    ("te:\n  detection: sflow\n  elephant_polls: 4\nsflow:\n  windows: 3\n",
     "c.yaml:4: sflow.windows: must be at least te.elephant_polls (4)"),
    ("te:\n  poll_interval_s: 0.000001\n", "c.yaml:2: te.poll_interval_s: must be in [0.1, 3600]"),
    ("te:\n  poll_interval_s: 100000\n", "c.yaml:2: te.poll_interval_s: must be in [0.1, 3600]"),
    ("te:\n  host_link_mbps: .inf\n", "c.yaml:2: te.host_link_mbps: must be a finite number"),
    ("te:\n  fabric_link_mbps: .nan\n", "c.yaml:2: te.fabric_link_mbps: must be a finite number"),
    ("te:\n  pattern_memory_s: .inf\n", "c.yaml:2: te.pattern_memory_s: must be a finite number"),
    ("te:\n  elephant_threshold: .nan\n", "c.yaml:2: te.elephant_threshold: must be a finite number"),
    ("rest:\n  token: ''\n", "c.yaml:2: rest.token: must be a non-empty string"),
    ("rest:\n  token: 'two words'\n", "c.yaml:2: rest.token: must be a non-empty string"),
    ("rest:\n  port: 8080\n  post_rate_per_s: 0\n", "c.yaml:3: rest.post_rate_per_s: must be > 0, got 0"),
    ("rest:\n  post_rate_per_s: many\n", "c.yaml:2: rest.post_rate_per_s: must be int or float, got 'many'"),
    ("rest:\n  post_burst: 2.5\n", "c.yaml:2: rest.post_burst: must be int, got 2.5"),
    ("rest:\n  client_timeout_s: 0\n", "c.yaml:2: rest.client_timeout_s: must be in [0.1, 300]"),
    ("rest:\n  client_timeout_s: .inf\n", "c.yaml:2: rest.client_timeout_s: must be a finite number"),
    ("rest:\n  max_decision_wait_s: -1\n", "c.yaml:2: rest.max_decision_wait_s: must be in (0, 600]"),
    ("jobs:\n  - name: a\n    hosts: [not-an-ip]\n", "c.yaml:3: jobs[0].hosts[0]: must be an IPv4 or IPv6 address"),
    ("jobs:\n  - name: a\n    hosts: [10.0.0.1, 7]\n", "c.yaml:3: jobs[0].hosts[1]: must be an IPv4 or IPv6 address"),
    ("jobs:\n  - name: a\n    hosts: [null]\n", "c.yaml:3: jobs[0].hosts[0]: must be an IPv4 or IPv6 address"),
    ("jobs:\n  - name: a\n    hosts: [10.0.0.300]\n", "c.yaml:3: jobs[0].hosts[0]: must be an IPv4 or IPv6 address"),
    ("jobs:\n  - name: a\n    hosts: [10.0.0.1]\n  - {name: b, hosts: ['fe80::1%eth0']}\n",
     "c.yaml:4: jobs[1].hosts[0]: must be an IPv4 or IPv6 address"),
    ("te:\n  mode: ilp\n", "c.yaml:2: te.mode: ilp needs te.time_budget_s"),
    ("te:\n  mode: annealing\n  time_budget_s: null\n", "c.yaml:2: te.mode: annealing needs te.time_budget_s"),
    ("te:\n  time_budget_s: 0\n", "c.yaml:2: te.time_budget_s: must be in (0, 3600]"),
    ("te:\n  time_budget_s: .inf\n", "c.yaml:2: te.time_budget_s: must be a finite number"),
    ("te:\n  mode: ml\x07route\n", "c.yaml:2: not valid YAML: character U+0007 is not allowed"),
    ("te: " + "[" * 100_000, "c.yaml: not valid YAML: nested too deeply"),
    ("tiers:\n  -5: core\n", "c.yaml:1: tiers.-5: a dpid must be an integer in [0, 2^64)"),
])
def test_bad_values_name_the_line_and_the_key(text, expected):
    with pytest.raises(config.ConfigError) as err:
        config.parse(text, "c.yaml")
    assert str(err.value).startswith(expected), str(err.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost", "ctl-1.lab.example"])
def test_good_rest_hosts_are_accepted(host):
    assert config.parse(f"rest:\n  host: '{host}'\n")["rest"]["host"] == host


def test_an_optimiser_with_a_time_budget_is_accepted():
    cfg = config.parse("te:\n  mode: ilp\n  time_budget_s: 0.5\n")
    assert cfg["te"]["mode"] == "ilp" and cfg["te"]["time_budget_s"] == 0.5
    assert config.parse("te:\n  time_budget_s: 0.5\n  mode: annealing\n")["te"]["time_budget_s"] == 0.5


def test_job_and_host_counts_are_bounded():
    hosts = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(config.MAX_JOB_HOSTS + 1)]
    with pytest.raises(config.ConfigError, match=r"c.yaml:1: jobs: at most \d+ hosts"):
        config.validate_jobs([{"name": "a", "hosts": hosts[:10]}, {"name": "b", "hosts": hosts[10:]}], "c.yaml:1")
    assert len(config.validate_jobs([{"name": "a", "hosts": hosts[:-1]}], "body")[0]["hosts"]) == len(hosts) - 1
    many = "".join(f"  - {{name: j{i}, hosts: [10.0.0.1]}}\n" for i in range(config.MAX_JOBS + 1))
    with pytest.raises(config.ConfigError, match=r"c.yaml:1: jobs: at most \d+ jobs"):
        config.parse("jobs:\n" + many, "c.yaml")
    ok = "".join(f"  - {{name: j{i}, hosts: [10.0.0.1]}}\n" for i in range(3))
    assert len(config.parse("jobs:\n" + ok)["jobs"]) == 3


def test_non_utf8_file_is_a_clear_error_with_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"te:\n  mode: mlroute\n  # caf\xe9\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(str(path))
    assert str(err.value).startswith(f"{path}:3: not UTF-8 text")


def test_bad_configuration_exits_2_with_one_line_and_no_traceback(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    env = {"MLROUTE_CONFIG": str(path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", "from controller import config; config.load_or_exit()"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"mlroute: invalid configuration: {path}:1: not UTF-8 text")


def test_host_learning_limits_are_configurable_and_checked():
    cfg = config.parse("hosts:\n  max_per_port: 8\n  new_per_port_per_s: 0.5\n")
    assert cfg["hosts"]["max_per_port"] == 8 and cfg["hosts"]["new_per_port_per_s"] == 0.5
    assert cfg["hosts"]["max_total"] == config.DEFAULTS["hosts"]["max_total"]
    with pytest.raises(config.ConfigError) as err:
        config.parse("te:\n  poll_interval_s: 2\nhosts:\n  max_total: 0\n", "c.yaml")
    assert str(err.value).startswith("c.yaml:4: hosts.max_total:"), str(err.value)


# -- issue 22: the cluster: section ---------------------------------------------------------------------------

def test_without_a_cluster_section_there_is_no_cluster():
    assert config.parse("te:\n  mode: ecmp\n")["cluster"] is None


def test_a_cluster_section_gets_its_defaults():
    cfg = config.parse("cluster:\n  zookeeper: zk1:2181,zk2:2181/fabric\n  node_id: ctl-a\n")["cluster"]
    assert cfg == {"zookeeper": "zk1:2181,zk2:2181/fabric", "node_id": "ctl-a", "name": "mlroute",
                   "session_timeout_s": 4.0, "advertise": None, "liveness_port": 0}
    off = config.parse("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  liveness_port: null\n")["cluster"]
    assert off["liveness_port"] is None


@pytest.mark.parametrize("text, expected", [
    ("cluster:\n  node_id: a\n", "c.yaml:1: cluster.zookeeper: required"),
    ("te:\n  mode: ecmp\ncluster:\n  zookeeper: zk:2181\n", "c.yaml:3: cluster.node_id: required"),
    ("cluster:\n  zookeeper: zk\n  node_id: a\n", "c.yaml:2: cluster.zookeeper: must be host:port"),
    ("cluster:\n  zookeeper: zk:99999\n  node_id: a\n", "c.yaml:2: cluster.zookeeper: must be host:port"),
    ("cluster:\n  zookeeper: zk:2181/a//b\n  node_id: a\n", "c.yaml:2: cluster.zookeeper: must be host:port"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a/b\n", "c.yaml:3: cluster.node_id: must be 1-64 letters"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  name: ''\n", "c.yaml:4: cluster.name: must be 1-64"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  liveness_port: 70000\n", "c.yaml:4: cluster.liveness_port"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  session_timeout_s: 0.1\n",
     "c.yaml:4: cluster.session_timeout_s: must be in [0.5, 600]"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  advertise: ftp://x\n",
     "c.yaml:4: cluster.advertise: must be an http(s):// URL"),
    ("cluster:\n  zookeeper: zk:2181\n  node_id: a\n  leader: a\n", "c.yaml:4: cluster.leader: unknown key"),
    ("cluster: [zk:2181]\n", "c.yaml:1: cluster: must be a mapping"),
])
def test_bad_cluster_values_name_the_line_and_the_key(text, expected):
    with pytest.raises(config.ConfigError) as err:
        config.parse(text, "c.yaml")
    assert str(err.value).startswith(expected), str(err.value)
