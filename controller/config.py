"""mlroute's YAML configuration: defaults, loading from ``MLROUTE_CONFIG``, and validation with clear errors.

Every error names the key path and the line (``config.yaml:7: te.poll_interval_s: must be a number > 0, got
'fast'``), and the controller refuses to start on one, so a typo never silently falls back to a default.
"""

import copy
import os
from dataclasses import dataclass

import yaml

from controller.tiers import TIER_NAMES
from mlroute.routing.optimisers import ALGORITHMS

TIER_VALUES = tuple(name for names in TIER_NAMES.values() for name in names)

DEFAULTS = {
    "rest": {"host": "127.0.0.1", "port": 8080, "token": None},
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
        "objective": "flow",  # "flow" or "job"
        "hysteresis": True,  # apply a new routing only if it improves the objective
        "accounting": "reactive",
        "ecmp_stagger": True,  # de-correlate SELECT-group hashing across tiers (against hash polarisation)  # "reactive" (first packet of a flow to the controller, plain OF1.3)
    },
    "jobs": [],  # [{name: str, hosts: [ip, ...]}]
}


class ConfigError(ValueError):
    """A configuration problem; the message names the file, line and key."""


@dataclass
class _Rule:
    kind: type | tuple
    check: object = None  # callable(value) -> error string or None
    nullable: bool = False


def _positive(v):
    return None if v > 0 else "must be > 0"


def _fraction(v):
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _choice(options):
    return lambda v: None if v in options else f"must be one of {', '.join(options)}"


def _port(v):
    return None if 0 < v < 65536 else "must be a TCP port (1-65535)"


NUMBER = (int, float)
SCHEMA = {
    "rest": {
        "host": _Rule(str),
        "port": _Rule(int, _port),
        "token": _Rule(str, nullable=True),
    },
    "te": {
        "mode": _Rule(str, _choice(ALGORITHMS)),
        "poll_interval_s": _Rule(NUMBER, _positive),
        "elephant_threshold": _Rule(NUMBER, _fraction),
        "elephant_polls": _Rule(int, _positive),
        "host_link_mbps": _Rule(NUMBER, _positive),
        "fabric_link_mbps": _Rule(NUMBER, _positive, nullable=True),
        "pattern_memory_s": _Rule(NUMBER, lambda v: None if v >= 0 else "must be >= 0"),
        "flow_idle_timeout_s": _Rule(int, _positive),
        "objective": _Rule(str, _choice(("flow", "job"))),
        "hysteresis": _Rule(bool),
        "accounting": _Rule(str, _choice(("reactive",))),
        "ecmp_stagger": _Rule(bool),
    },
}


def load(path=None):
    """Load and validate the configuration; ``path`` defaults to ``$MLROUTE_CONFIG``; none means defaults."""
    path = path or os.environ.get("MLROUTE_CONFIG")
    if not path:
        return copy.deepcopy(DEFAULTS)
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from exc
    return parse(text, path)


def parse(text, name="<config>"):
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark else name
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    config = copy.deepcopy(DEFAULTS)
    if node is None:
        return config
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name}:{node.start_mark.line + 1}: the configuration must be a mapping of sections")
    for key_node, value_node in node.value:
        key = key_node.value
        line = f"{name}:{key_node.start_mark.line + 1}"
        value = yaml.safe_load(yaml.serialize(value_node))
        if key in SCHEMA:
            config[key].update(_section(key, value_node, value, name))
        elif key == "tiers":
            config["tiers"] = _tiers(value, line)
        elif key == "jobs":
            config["jobs"] = _jobs(value, line)
        else:
            raise ConfigError(f"{line}: {key}: unknown section (known: {', '.join(sorted(DEFAULTS))})")
    return config


def _section(section, node, value, name):
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name}:{node.start_mark.line + 1}: {section}: must be a mapping")
    out = {}
    rules = SCHEMA[section]
    for key_node, _ in node.value:
        key = key_node.value
        line = f"{name}:{key_node.start_mark.line + 1}"
        if key not in rules:
            raise ConfigError(f"{line}: {section}.{key}: unknown key (known: {', '.join(sorted(rules))})")
        rule, v = rules[key], value[key]
        if v is None and rule.nullable:
            out[key] = None
            continue
        kinds = rule.kind if isinstance(rule.kind, tuple) else (rule.kind,)
        if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
            want = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(f"{line}: {section}.{key}: must be {want}, got {v!r}")
        problem = rule.check(v) if rule.check else None
        if problem:
            raise ConfigError(f"{line}: {section}.{key}: {problem}, got {v!r}")
        out[key] = v
    return out


def _tiers(value, line):
    if not isinstance(value, dict):
        raise ConfigError(f"{line}: tiers: must map dpid -> tier")
    out = {}
    for dpid, tier in value.items():
        if isinstance(dpid, str):
            try:
                dpid = int(dpid, 0)
            except ValueError:
                raise ConfigError(f"{line}: tiers.{dpid}: a dpid must be an integer (decimal or 0x...)") from None
        if not isinstance(dpid, int) or tier not in TIER_VALUES:
            raise ConfigError(f"{line}: tiers.{dpid}: tier must be one of {', '.join(TIER_VALUES)}, got {tier!r}")
        out[dpid] = tier
    return out


def _jobs(value, line):
    if not isinstance(value, list):
        raise ConfigError(f"{line}: jobs: must be a list of {{name, hosts}}")
    out = []
    for i, job in enumerate(value):
        if not isinstance(job, dict) or not isinstance(job.get("name"), str) or not isinstance(job.get("hosts"), list):
            raise ConfigError(f"{line}: jobs[{i}]: needs name (string) and hosts (list of IPv4 addresses)")
        extra = set(job) - {"name", "hosts"}
        if extra:
            raise ConfigError(f"{line}: jobs[{i}].{sorted(extra)[0]}: unknown key (known: hosts, name)")
        out.append({"name": job["name"], "hosts": [str(h) for h in job["hosts"]]})
    return out
