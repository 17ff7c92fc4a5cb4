"""mlroute's YAML configuration: defaults, loading from ``MLROUTE_CONFIG``, and validation with clear errors.

Every error names the key path and the line (``config.yaml:7: te.poll_interval_s: must be a number > 0, got
'fast'``), and the controller refuses to start on one, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import copy
import ipaddress
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from controller.desired import flowcopy, switch_profiles
from controller.state import job_store
from controller.state import jobs as declared_jobs
from controller.state.tiers import TIER_NAMES
from mlroute.errors import MlrouteError
from mlroute.routing.optimisers import ALGORITHMS

TIER_VALUES = tuple(name for names in TIER_NAMES.values() for name in names)

DEFAULTS: dict[str, Any] = {
    "rest": {
        "host": "127.0.0.1", "port": 8080, "token": None,
        "post_rate_per_s": 5.0,  # POSTs per client address per second on average (a token bucket) ...
        "post_burst": 10,  # ... and at once; past them 429 with Retry-After
        "client_timeout_s": 5.0,  # a request's line and headers, and each body read, within this; else cut off
        "max_decision_wait_s": 10.0,  # a caller waits this long for a decision at most; else 503 + Retry-After
    },
    "tiers": {},  # dpid -> tier, pins inference for odd labs
    "te": {
        "mode": "mlroute",  # "ecmp" = no re-optimisation; else the optimiser's name
        "poll_interval_s": 2.0,
        "elephant_threshold": 0.1,  # fraction of the host link capacity
        "elephant_polls": 2,  # consecutive polls above the threshold
        "host_link_mbps": 10.0,  # host NIC capacity used for thresholds and demands
        "fabric_link_mbps": None,  # None: same as host_link_mbps
        "pattern_memory_s": 30.0,  # an idle elephant keeps its route this long
        "flow_idle_timeout_s": 10,  # idle timeout of per-transport-flow accounting rules
        "time_budget_s": None,  # optimiser time limit; None: the poll interval (ilp / annealing need one)
        "objective": "flow",  # "flow" or "job"
        "hysteresis": True,  # apply a new routing only if it improves the objective
        "accounting": "reactive",
        "new_flows_per_s": 1000,  # counting rules installed per second at most; past it, flows are counted per
        # host pair (one rule for all a pair's flows: controller/state/pair_rates.py) within the caps below
        "pair_new_flows_per_s": 50,  # a host pair opening more new flows a second than this is counted whole
        "max_pairs_per_port": 16,  # host pairs counted whole at one ingress port at most ...
        "max_pairs": 4096,  # ... and in all; past them, new flows stay on ECMP uncounted
        "flow_copy": "auto",  # auto: learn on Open vSwitch, plain OF1.3 elsewhere; learn; controller
        "ecmp_stagger": True,  # de-correlate SELECT-group hashing across tiers (against hash polarisation)
        # flowstats: a counting rule per flow; sflow: samples (sflow:); both; auto: per switch, sflow where its
        # export is heard, flowstats elsewhere
        "detection": "flowstats",
    },
    "sflow": {  # elephants from sFlow samples (te.detection: sflow | both | auto; docs/sflow.md)
        "host": "127.0.0.1",  # the collector's UDP address ...
        "port": 6343,  # ... and port (sFlow's own)
        "window_s": 1.0,  # rates over windows this long; an elephant after te.elephant_polls windows above
        "windows": 5,  # completed windows kept per flow and host pair
        "idle_windows": 10,  # a flow without a sample for this many windows is forgotten
        "max_flows": 100000,  # 5-tuples tracked at most (the smallest eighth evicted when full)
        "max_pairs": 20000,  # host pairs tracked at most
        "pairs": True,  # a host pair above the threshold with no elephant 5-tuple is routed as one demand
        "rcvbuf_bytes": 8388608,  # the collector's socket receive buffer
        # te.detection auto: a switch with no sample heard this long goes back to flow stats (two of Open vSwitch's
        # default 30-s counter polling intervals: an idle switch that exports is never silent this long)
        "silent_s": 60.0,
    },
    "jobs": [],  # [{name: str, hosts: [ip, ...]}]
    # [{dpid | description, profile, overrides}]: switch profiles (controller/desired/switch_profiles.py)
    "switches": [],
    "audit": {  # installed state verified (controller/desired/audit.py): each switch's tables read back and compared
        "period_s": 60.0,  # every switch at least this often (and at once when its table stats come up short)
        "entries_per_s": 5000,  # entries read back per second at most (~20 us of event loop each: bench_audit.py)
    },
    "hosts": {  # bounded host learning: one host cannot make the controller fill every table (threat model)
        "max_per_port": 64,  # bindings at one access port (a hypervisor's VMs, a container host)
        "max_total": 16384,  # bindings in all (a k=48 fat-tree has 27,648 hosts: raise it there)
        "new_per_port_per_s": 5.0,  # new addresses learned per second at one port (token bucket) ...
        "new_per_port_burst": 64,  # ... after a burst of this many (a port's hosts all coming up at once)
        "age_after_s": 300.0,  # a host silent this long is probed (ARP); 0: bindings never age (host_ageing.py)
        "probes": 3,  # ... this many times; unanswered, it is forgotten with its rules
        "probe_interval_s": 1.0,  # ... at least this far apart (probes go out with the housekeeping, every poll)
    },
    "state": {  # what a single controller keeps across restarts (controller/state/job_state_file.py)
        "file": None,  # its declared jobs; None: beside the configuration (<name>.jobs.json) or ./mlroute.jobs.json
    },
    "cluster": None,  # a controller cluster on ZooKeeper (controller/cluster/); None: one controller, no ZooKeeper
}

#: the ``cluster:`` section's defaults; ``zookeeper`` and ``node_id`` have none (a cluster needs both)
CLUSTER_DEFAULTS: dict[str, Any] = {
    "zookeeper": None,  # connection string: host:port[,host:port...][/chroot]
    "name": "mlroute",  # the cluster (one fabric): its znodes live under /mlroute/<name>
    "node_id": None,  # this controller's id, unique in the cluster
    "session_timeout_s": 4.0,  # a dead leader is replaced this long after it stopped answering ZooKeeper
    "advertise": None,  # the REST URL others reach this node at; None: http://<rest.host>:<rest.port>
    # the TCP port on rest.host whose closing proves this process ended (controller/cluster/liveness.py): a dead
    # leader is replaced at once, not after its session; 0: any free port (published in ZooKeeper); None: off
    "liveness_port": 0,
}
CLUSTER_REQUIRED = ("zookeeper", "node_id")


#: bounds on what a configuration (or a REST call) may ask the controller to keep in memory
MAX_JOBS = 1024
MAX_JOB_HOSTS = 32768  # host entries over all jobs (a k=48 fat-tree has 27,648 hosts)
JOB_LEASE_RANGE_S = (1.0, 3600.0)  # a per-job REST declaration's lease_s (controller/state/job_leases.py)
#: a job's name in a per-job REST path (/mlroute/jobs/{name}): URL-safe as is, a torchrun run id (a UUID) fits
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
MAX_FLOW_IDLE_TIMEOUT_S = 65535  # OpenFlow's idle_timeout is a uint16
POLL_INTERVAL_RANGE_S = (0.1, 3600.0)  # below 0.1 s the poll loop alone keeps a core busy
MAX_TIME_BUDGET_S = 3600.0
CLIENT_TIMEOUT_RANGE_S = (0.1, 300.0)
MAX_DECISION_WAIT_S = 600.0
NEEDS_TIME_BUDGET = ("ilp", "annealing")  # they search until stopped: no budget, no bound on the event loop
DETECTION_MODES = ("flowstats", "sflow", "both", "auto")  # te.detection
# RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, 253 characters at most
_HOSTNAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a znode name: no slash, no leading dot
# ZooKeeper's connection string: host:port pairs, an optional chroot
_ZK_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}")
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")  # printable ASCII, no whitespace: an HTTP header value as is


class ConfigError(MlrouteError, ValueError):
    """A configuration problem; the message names the file, line and key."""


@dataclass
class _Rule:
    kind: type | tuple[type, ...]
    check: Callable[[Any], str | None] | None = None  # callable(value) -> error string or None
    nullable: bool = False


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _choice(options: Iterable[str]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"must be one of {', '.join(options)}"


def _port(v: int) -> str | None:
    return None if 0 < v < 65536 else "must be a TCP port (1-65535)"


def _between(low: float, high: float) -> Callable[[float], str | None]:
    return lambda v: None if low <= v <= high else f"must be in [{low:g}, {high:g}]"


def _idle_timeout(v: int) -> str | None:
    if v <= 0:
        return "must be > 0"
    return None if v <= MAX_FLOW_IDLE_TIMEOUT_S else \
        f"must be at most {MAX_FLOW_IDLE_TIMEOUT_S} (OpenFlow's 16-bit idle timeout)"


def _up_to(high: float) -> Callable[[float], str | None]:
    return lambda v: None if 0 < v <= high else f"must be in (0, {high:g}]"


def _bind_host(v: str) -> str | None:
    """Checked without the network: a literal IPv4/IPv6 address or a syntactically valid host name."""
    try:
        ipaddress.ip_address(v)
        return None
    except ValueError:
        pass
    return None if _HOSTNAME.fullmatch(v) else "must be an IP address or a host name"


def _token(v: str) -> str | None:
    return None if _TOKEN.fullmatch(v) else \
        "must be a non-empty string of printable characters without spaces (or null: no mutating calls)"


def _zookeeper(v: str) -> str | None:
    hosts, _, chroot = v.partition("/")
    ok = all(_ZK_HOST.fullmatch(h) and 0 < int(h.rsplit(":", 1)[1]) < 65536 for h in hosts.split(","))
    if ok and (not chroot or all(_NODE_ID.fullmatch(part) for part in chroot.split("/"))):
        return None
    return "must be host:port[,host:port...][/chroot] (ZooKeeper's connection string)"


def _node_id(v: str) -> str | None:
    return None if _NODE_ID.fullmatch(v) else \
        "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _url(v: str) -> str | None:
    scheme, _, rest = v.partition("://")
    return None if scheme in ("http", "https") and rest and " " not in rest else "must be an http(s):// URL"


def _file_name(v: str) -> str | None:
    return None if v.strip() and "\0" not in v and not v.endswith("/") else \
        "must be a file name (relative: to the configuration's directory), or null for the default"


NUMBER = (int, float)
SCHEMA = {
    "rest": {
        "host": _Rule(str, _bind_host),
        "port": _Rule(int, _port),
        "token": _Rule(str, _token, nullable=True),
        "post_rate_per_s": _Rule(NUMBER, _positive),
        "post_burst": _Rule(int, _positive),
        "client_timeout_s": _Rule(NUMBER, _between(*CLIENT_TIMEOUT_RANGE_S)),
        "max_decision_wait_s": _Rule(NUMBER, _up_to(MAX_DECISION_WAIT_S)),
    },
    "te": {
        "mode": _Rule(str, _choice(ALGORITHMS)),
        "poll_interval_s": _Rule(NUMBER, _between(*POLL_INTERVAL_RANGE_S)),
        "elephant_threshold": _Rule(NUMBER, _fraction),
        "elephant_polls": _Rule(int, _positive),
        "host_link_mbps": _Rule(NUMBER, _positive),
        "fabric_link_mbps": _Rule(NUMBER, _positive, nullable=True),
        "pattern_memory_s": _Rule(NUMBER, lambda v: None if v >= 0 else "must be >= 0"),
        "flow_idle_timeout_s": _Rule(int, _idle_timeout),
        "time_budget_s": _Rule(NUMBER, _up_to(MAX_TIME_BUDGET_S), nullable=True),
        "objective": _Rule(str, _choice(("flow", "job"))),
        "hysteresis": _Rule(bool),
        "accounting": _Rule(str, _choice(("reactive",))),
        "new_flows_per_s": _Rule(int, _positive),
        "pair_new_flows_per_s": _Rule(int, _positive),
        "max_pairs_per_port": _Rule(int, _between(0, 65536)),
        "max_pairs": _Rule(int, _between(0, 10_000_000)),
        "flow_copy": _Rule(str, _choice(flowcopy.MODES)),
        "ecmp_stagger": _Rule(bool),
        "detection": _Rule(str, _choice(DETECTION_MODES)),
    },
    "sflow": {
        "host": _Rule(str, _bind_host),
        "port": _Rule(int, _port),
        "window_s": _Rule(NUMBER, _between(0.1, 60.0)),
        "windows": _Rule(int, _between(1, 3600)),
        "idle_windows": _Rule(int, _between(1, 3600)),
        "max_flows": _Rule(int, _between(1, 10_000_000)),
        "max_pairs": _Rule(int, _between(1, 10_000_000)),
        "pairs": _Rule(bool),
        "rcvbuf_bytes": _Rule(int, _between(65536, 1 << 30)),
        "silent_s": _Rule(NUMBER, _between(1.0, 3600.0)),
    },
    "audit": {
        "period_s": _Rule(NUMBER, _between(1.0, 86400.0)),
        "entries_per_s": _Rule(NUMBER, _positive),
    },
    "hosts": {
        "max_per_port": _Rule(int, _positive),
        "max_total": _Rule(int, _positive),
        "new_per_port_per_s": _Rule(NUMBER, _positive),
        "new_per_port_burst": _Rule(int, _positive),
        "age_after_s": _Rule(NUMBER, lambda v: None if v >= 0 else "must be >= 0 (0: never age)"),
        "probes": _Rule(int, _positive),
        "probe_interval_s": _Rule(NUMBER, _positive),
    },
    "state": {
        "file": _Rule(str, _file_name, nullable=True),
    },
    "cluster": {
        "zookeeper": _Rule(str, _zookeeper),
        "name": _Rule(str, _node_id),
        "node_id": _Rule(str, _node_id),
        "session_timeout_s": _Rule(NUMBER, _between(0.5, 600.0)),
        "advertise": _Rule(str, _url, nullable=True),
        "liveness_port": _Rule(int, _between(0, 65535), nullable=True),
    },
}


def load(path: str | None = None) -> dict[str, Any]:
    """Load and validate the configuration; ``path`` defaults to ``$MLROUTE_CONFIG``; none means defaults."""
    path = path or os.environ.get("MLROUTE_CONFIG")
    if not path:
        return copy.deepcopy(DEFAULTS)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # the locale's codec would raise past the ConfigError handler
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") \
            from None
    return parse(text, path)


def load_or_exit(path: str | None = None, stderr: TextIO | None = None) -> dict[str, Any]:
    """``load`` for a program's start: a bad configuration is one line on stderr and exit status 2."""
    try:
        return load(path)
    except ConfigError as exc:
        (stderr or sys.stderr).write(f"mlroute: invalid configuration: {exc}\n")
        raise SystemExit(2) from None


def parse(text: str, name: str = "<config>") -> dict[str, Any]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f"{name}:{mark.line + 1}"
        elif isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
            where = f"{name}:{text[:exc.position].count(chr(10)) + 1}"
            code = exc.character if isinstance(exc.character, int) else ord(exc.character)
            raise ConfigError(f"{where}: not valid YAML: character U+{code:04X} is not allowed") from None
        else:
            where = name
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    except RecursionError:
        raise ConfigError(f"{name}: not valid YAML: nested too deeply") from None
    config = copy.deepcopy(DEFAULTS)
    if node is None:
        return config
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name}:{node.start_mark.line + 1}: the configuration must be a mapping of sections")
    for key_node, value_node in node.value:
        key = key_node.value
        line = f"{name}:{key_node.start_mark.line + 1}"
        value = yaml.safe_load(yaml.serialize(value_node))
        if key == "cluster":
            config["cluster"] = _cluster(value_node, value, name, line)
        elif key in SCHEMA:
            config[key].update(_section(key, value_node, value, name))
        elif key == "tiers":
            config["tiers"] = _tiers(value, line)
        elif key == "jobs":
            config["jobs"] = _jobs(value, line, value_node, name)
        elif key == "switches":
            config["switches"] = _switches(value_node, name)
        else:
            raise ConfigError(f"{line}: {key}: unknown section (known: {', '.join(sorted(DEFAULTS))})")
    _idle_floors(config, node, name)
    _sflow_windows(config, node, name)
    return config


def _cluster(node: yaml.Node, value: Any, name: str, line: str) -> dict[str, Any]:
    """``cluster:`` present: its keys checked, ``zookeeper`` and ``node_id`` required (no default can name them)."""
    given = _section("cluster", node, value, name)
    for key in CLUSTER_REQUIRED:
        if given.get(key) is None:
            raise ConfigError(f"{line}: cluster.{key}: required in a cluster: section")
    return {**CLUSTER_DEFAULTS, **given}


def _sflow_windows(config: dict[str, Any], node: yaml.Node, name: str) -> None:
    """With sFlow detection an elephant needs te.elephant_polls windows in a row: sflow.windows must keep them."""
    if config["te"]["detection"] == "flowstats" or config["te"]["elephant_polls"] <= config["sflow"]["windows"]:
        return
    line = next((k.start_mark.line + 1 for k, _ in getattr(node, "value", ()) if k.value == "sflow"), 1)
    raise ConfigError(f"{name}:{line}: sflow.windows: must be at least te.elephant_polls "
                      f"({config['te']['elephant_polls']}) with te.detection {config['te']['detection']}, "
                      f"got {config['sflow']['windows']}")


def _switches(node: yaml.Node, name: str) -> list[dict[str, Any]]:
    """``switches:``: a list of profile entries, each checked (switch_profiles.entry_from) with its line."""
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{name}:{node.start_mark.line + 1}: switches: must be a list of entries (dpid or "
                          "description, profile, overrides)")
    out = []
    for i, item in enumerate(node.value):
        value = yaml.safe_load(yaml.serialize(item))
        try:
            switch_profiles.entry_from(value)
        except switch_profiles.ProfileError as exc:
            key = str(exc).split(":", 1)[0]
            keys = {k.value: k.start_mark.line for k, _ in item.value} if isinstance(item, yaml.MappingNode) else {}
            where = f"switches[{i}].{exc}" if key in keys else f"switches[{i}]: {exc}"
            raise ConfigError(f"{name}:{keys.get(key, item.start_mark.line) + 1}: {where}") from None
        out.append(value)
    return out


def _idle_floors(config: dict[str, Any], node: yaml.Node, name: str) -> None:
    """A configured switch profile's idle-timeout floor above te.flow_idle_timeout_s: the switch would refuse
    (or round up) every counting rule, so the configuration says so at start."""
    idle = config["te"]["flow_idle_timeout_s"]
    items: list[yaml.Node] = next((v.value for k, v in getattr(node, "value", ()) if k.value == "switches"
                                   and isinstance(v, yaml.SequenceNode)), [])
    for i, value in enumerate(config["switches"]):
        floor = switch_profiles.entry_from(value).profile.min_idle_timeout_s
        if floor > idle:
            raise ConfigError(f"{name}:{items[i].start_mark.line + 1}: switches[{i}]: its profile's "
                              f"min_idle_timeout_s ({floor} s) is above te.flow_idle_timeout_s ({idle} s): raise "
                              f"te.flow_idle_timeout_s to at least {floor}")


def _section(section: str, node: yaml.Node, value: Any, name: str) -> dict[str, Any]:
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name}:{node.start_mark.line + 1}: {section}: must be a mapping")
    out: dict[str, Any] = {}
    lines: dict[str, str] = {}
    rules = SCHEMA[section]
    for key_node, _ in node.value:
        key = key_node.value
        line = f"{name}:{key_node.start_mark.line + 1}"
        if key not in rules:
            raise ConfigError(f"{line}: {section}.{key}: unknown key (known: {', '.join(sorted(rules))})")
        rule, v = rules[key], value[key]
        lines[key] = line
        if v is None and rule.nullable:
            out[key] = None
            continue
        kinds = rule.kind if isinstance(rule.kind, tuple) else (rule.kind,)
        if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
            want = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(f"{line}: {section}.{key}: must be {want}, got {v!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{line}: {section}.{key}: must be a finite number, got {v!r}")
        problem = rule.check(v) if rule.check else None
        if problem:
            raise ConfigError(f"{line}: {section}.{key}: {problem}, got {v!r}")
        out[key] = v
    if section == "te" and out.get("mode") in NEEDS_TIME_BUDGET and out.get("time_budget_s") is None:
        raise ConfigError(f"{lines['mode']}: te.mode: {out['mode']} needs te.time_budget_s (seconds): it searches "
                          "until stopped, and the controller must bound how long it waits")
    return out


def _tiers(value: Any, line: str) -> dict[int, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{line}: tiers: must map dpid -> tier")
    out = {}
    for dpid, tier in value.items():
        if isinstance(dpid, str):
            try:
                dpid = int(dpid, 0)
            except ValueError:
                raise ConfigError(f"{line}: tiers.{dpid}: a dpid must be an integer (decimal or 0x...)") from None
        if not isinstance(dpid, int) or not 0 <= dpid < 2 ** 64:
            raise ConfigError(f"{line}: tiers.{dpid}: a dpid must be an integer in [0, 2^64)")
        if tier not in TIER_VALUES:
            raise ConfigError(f"{line}: tiers.{dpid}: tier must be one of {', '.join(TIER_VALUES)}, got {tier!r}")
        out[dpid] = tier
    return out


def validate_jobs(value: Any, where: str) -> list[dict[str, Any]]:
    """Jobs from a request body (``where`` prefixes every error, e.g. "request body"): as from the file, but a
    traffic file is not read on behalf of a request (a body carries its rings / stages itself)."""
    return _jobs(value, where, files=False)


JOB_KEYS = ("hosts", "name", "nodes", "rings", "stages", "traffic", "weight")


def _jobs(value: Any, line: str, node: yaml.Node | None = None, name: str | None = None,
          files: bool = True) -> list[dict[str, Any]]:
    """The job list: ``name``; ``hosts`` and/or collective structure (controller.state.jobs): ``rings`` (ordered
    host lists), ``stages`` (pipeline chains), ``traffic`` (a file in the authors' format, its src/dst IP
    addresses or node ids mapped by ``nodes``); optional ``weight`` > 0 for the job-level objective."""
    if not isinstance(value, list):
        raise ConfigError(f"{line}: jobs: must be a list of {{name, hosts}}")
    if len(value) > MAX_JOBS:
        raise ConfigError(f"{line}: jobs: at most {MAX_JOBS} jobs, got {len(value)}")
    total = sum(_host_entries(job) for job in value)
    if total > MAX_JOB_HOSTS:
        raise ConfigError(f"{line}: jobs: at most {MAX_JOB_HOSTS} hosts over all jobs, got {total}")
    out = []
    for i, job in enumerate(value):
        structured = isinstance(job, dict) and any(k in job for k in ("rings", "stages", "traffic"))
        if not isinstance(job, dict) or not isinstance(job.get("name"), str) or \
                not (isinstance(job.get("hosts"), list) or structured and "hosts" not in job):
            raise ConfigError(f"{line}: jobs[{i}]: needs name (string) and hosts (list of IPv4 / IPv6 addresses) "
                              "or rings / stages / traffic")
        extra = set(job) - set(JOB_KEYS)
        if extra:
            raise ConfigError(f"{line}: jobs[{i}].{sorted(extra)[0]}: unknown key (known: {', '.join(JOB_KEYS)})")
        entry = {"name": job["name"], "hosts": _job_hosts(job.get("hosts", []), i, line, node, name)}
        entry.update(_job_structure(job, i, line, node, name, files))
        entry["hosts"] = declared_jobs.job_hosts(entry["hosts"], [*entry.get("rings", ()), *entry.get("stages", ())])
        out.append(entry)
    return out


def job_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a job in a per-job REST path, or None."""
    return None if JOB_NAME.fullmatch(name) else \
        "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def job_rules() -> job_store.JobRules:
    """This configuration's rules for a job list, for the state file's reader (which may not import this)."""
    return job_store.JobRules(validate_jobs, check_job_bounds, JOB_LEASE_RANGE_S, ConfigError)


def check_job_bounds(jobs: Sequence[Mapping[str, Any]], where: str) -> None:
    """The bounds of a whole job list on a list of validated jobs (a per-job call's result): at most MAX_JOBS
    jobs and MAX_JOB_HOSTS host entries. A validated job's hosts include its ring and stage members, so those
    count once: never more than its declaration listed, so a list a whole-list call admitted passes here too."""
    if len(jobs) > MAX_JOBS:
        raise ConfigError(f"{where}: at most {MAX_JOBS} jobs, got {len(jobs)}")
    total = 0
    for job in jobs:
        members = [h for key in ("rings", "stages") for group in job.get(key) or () for h in group]
        inside = set(members)
        total += len(members) + sum(1 for h in job["hosts"] if h not in inside)
    if total > MAX_JOB_HOSTS:
        raise ConfigError(f"{where}: at most {MAX_JOB_HOSTS} hosts over all jobs, got {total}")


def _host_entries(job: Any) -> int:
    """Host entries a job lists (hosts, ring and stage members), for the bound on what a job list may hold."""
    if not isinstance(job, dict):
        return 0
    count = len(job["hosts"]) if isinstance(job.get("hosts"), list) else 0
    for key in ("rings", "stages"):
        groups = job.get(key)
        if isinstance(groups, list):
            count += sum(len(g) if isinstance(g, list) else 1 for g in groups)
    return count


def _job_structure(job: Mapping[str, Any], i: int, line: str, node: yaml.Node | None, name: str | None,
                   files: bool) -> dict[str, Any]:
    """A job's rings / stages / traffic / weight, validated; errors at the key's line."""
    out: dict[str, Any] = {}
    try:
        for key in ("rings", "stages"):
            if key in job:
                out[key] = _groups(job[key], i, key, _key_line(node, name, i, key) or line)
        if "traffic" in job:
            _traffic(job, i, _key_line(node, name, i, "traffic") or line, name, files, out)
        elif "nodes" in job:
            raise ConfigError(f"{_key_line(node, name, i, 'nodes') or line}: jobs[{i}].nodes: only with traffic")
    except declared_jobs.DeclarationError as exc:
        raise ConfigError(str(exc)) from None
    if "weight" in job:
        w = job["weight"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and w > 0):
            where = _key_line(node, name, i, "weight") or line
            raise ConfigError(f"{where}: jobs[{i}].weight: must be a finite number > 0, got {w!r}")
        out["weight"] = float(w)
    return out


def _groups(groups: Any, i: int, key: str, where: str) -> list:
    """A job's ``rings`` or ``stages``: a non-empty list of host lists."""
    if not isinstance(groups, list) or not groups:
        raise ConfigError(f"{where}: jobs[{i}].{key}: must be a non-empty list of host lists")
    return [declared_jobs.check_members(g, where, f"jobs[{i}].{key}[{r}]") for r, g in enumerate(groups)]


def _traffic(job: Mapping[str, Any], i: int, where: str, name: str | None, files: bool, out: dict[str, Any]) -> None:
    """A job's ``traffic`` file (and its ``nodes`` map) read into ``out``'s rings or stages."""
    path, nodes = job["traffic"], job.get("nodes")
    if not files:
        raise ConfigError(f"{where}: jobs[{i}].traffic: traffic files are read from the configuration only; a "
                          "request gives rings / stages")
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}: jobs[{i}].traffic: must be a file name, got {path!r}")
    if nodes is not None and not isinstance(nodes, dict):
        raise ConfigError(f"{where}: jobs[{i}].nodes: must map node id -> IPv4 or IPv6 address")
    kind, groups = declared_jobs.read_traffic(declared_jobs.resolve_path(path, name), f"{where}: jobs[{i}]", nodes)
    out.setdefault("rings" if kind == "allreduce" else "stages", []).extend(groups)
    out["traffic"] = path


def _key_line(node: yaml.Node | None, name: str | None, i: int, key: str) -> str | None:
    """file:line of ``jobs[i].key`` in the YAML node tree, or None (REST bodies have no lines)."""
    if node is None:
        return None
    try:
        return f"{name}:{next(k for k, _ in node.value[i].value if k.value == key).start_mark.line + 1}"
    except (AttributeError, IndexError, StopIteration, TypeError):
        return None


def _job_hosts(hosts: Sequence[Any], i: int, line: str, node: yaml.Node | None, name: str | None) -> list[str]:
    """Each host an IPv4 or IPv6 address string (the flow tables match ipv4_src / ipv6_src on it), canonical
    (``jobs.host_address``); errors at the host's line."""
    out = []
    for j, host in enumerate(hosts):
        address = declared_jobs.host_address(host)
        if address is None:
            where = _item_line(node, name, i, j) or line
            raise ConfigError(f"{where}: jobs[{i}].hosts[{j}]: must be an IPv4 or IPv6 address, got {host!r}")
        out.append(address)
    return out


def _item_line(node: yaml.Node | None, name: str | None, i: int, j: int) -> str | None:
    """file:line of ``jobs[i].hosts[j]`` in the YAML node tree, or None (REST bodies have no lines)."""
    if node is None:
        return None
    try:
        job = node.value[i]
        hosts = next(v for k, v in job.value if k.value == "hosts")
        return f"{name}:{hosts.value[j].start_mark.line + 1}"
    except (AttributeError, IndexError, StopIteration, TypeError):
        return None
