"""The Docker deployment path (Dockerfile, docker-compose.yml, .dockerignore, examples/mlroute.docker.yaml).

No Docker engine is needed: these are static checks that the files agree with each other and with the repository
(every path they name exists, the mounted configuration loads, the commands they run are real). When a compose
implementation is installed, `docker compose config` / `docker-compose config` validates the file too.
docs/docker.md records the real build and the smoke tests.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
from importlib import metadata
from pathlib import Path, PurePosixPath

import pytest
import tomllib
import yaml

from controller import config as mlconfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKER_CONFIG = ROOT / "examples" / "mlroute.docker.yaml"
EXPERIMENT_MODULE = ROOT / "mlroute" / "commands" / "experiment.py"
SYSTEM_TOOLS = {"sh"}  # executables the image gets from Debian itself
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}  # what the builder accepts


# ---------------------------------------------------------------------------------------------------- parsing


def _compose():
    return yaml.safe_load(COMPOSE.read_text())


def _service(name):
    return _compose()["services"][name]


def _dockerfile():
    """[(stage, instruction, arguments)] with continuation lines joined and comments dropped."""
    out, stage, pending = [], None, ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        instruction, _, args = line.partition(" ")
        instruction = instruction.upper()
        assert instruction in INSTRUCTIONS, f"Dockerfile: {line[:60]!r} is no instruction (a comment without #?)"
        if instruction == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", args.strip(), re.IGNORECASE)
            stage = m.group(2) or m.group(1)
        out.append((stage, instruction, args.strip()))
    assert not pending, "Dockerfile ends inside a continuation line"
    return out


def _stages():
    return [s for s, ins, _ in _dockerfile() if ins == "FROM"]


def _instructions(stage, instruction):
    """The arguments of ``instruction`` in ``stage``, including what the stage inherits from its parents."""
    parents = {s: args.split()[0] for s, ins, args in _dockerfile() if ins == "FROM"}
    chain = [stage]
    while parents.get(chain[-1]) in parents:
        chain.append(parents[chain[-1]])
    return [args for s in reversed(chain) for st, ins, args in _dockerfile() if st == s and ins == instruction]


def _exec_form(stage, instruction):
    values = _instructions(stage, instruction)
    if not values:
        return None
    value = json.loads(values[-1])  # exec (JSON) form: no shell wrapping, signals reach the process
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"{instruction} of {stage}"
    return value


def _workdir(stage):
    return PurePosixPath(_instructions(stage, "WORKDIR")[-1])


def _env(stage):
    env = {}
    for args in _instructions(stage, "ENV"):
        for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', args):
            env[key] = value.strip('"')
    return env


def _console_scripts():
    """Commands the image's venv gets: this project's entry points (pyproject.toml) and, where this venv has
    Ryu (the image's default framework), its ryu-manager."""
    scripts = set(_pyproject()["project"]["scripts"])
    try:
        scripts |= {ep.name for ep in metadata.distribution("ryu").entry_points if ep.group == "console_scripts"}
    except metadata.PackageNotFoundError:  # the os-ken venv
        pass
    return scripts


def _relative_paths(words):
    """Words of a command (also inside ``sh -c`` strings) that name repository files, e.g. scripts/setup_env.sh."""
    found = []
    for word in words:
        for token in re.findall(r"(?<![\w$/.-])([A-Za-z_][\w.-]*(?:/[\w.-]+)+)", word):
            found.append(token)
    return found


def _unescape_compose(words):
    return [w.replace("$$", "$") for w in words]  # compose interpolation: $$ is a literal $


# ---------------------------------------------------------------------------------------------------- compose


def test_compose_has_the_controller_and_emulation_services_with_their_keys():
    compose = _compose()
    assert set(compose["services"]) >= {"controller", "emulation"}
    stages = _stages()
    for name, service in compose["services"].items():
        build = service["build"]
        assert build["context"] == "." and build["dockerfile"] == "Dockerfile", name
        assert build["target"] in stages, f"{name}: build target {build['target']!r} is no Dockerfile stage"

    controller = compose["services"]["controller"]
    assert controller["build"]["target"] == "controller"
    assert "6653:6653" in controller["ports"]
    rest_ports = [p for p in controller["ports"] if str(p).endswith(":8080")]
    assert rest_ports == ["127.0.0.1:8080:8080"], "REST must be published on the host's loopback only"

    emulation = compose["services"]["emulation"]
    assert emulation["build"]["target"] == "emulation"
    assert emulation["privileged"] is True
    assert emulation["network_mode"] == "host"
    assert "ports" not in emulation  # meaningless with the host network
    results = [v for v in emulation["volumes"] if v.split(":")[0] == "./results"]
    assert results, "experiment results must land in the host's ./results"
    # mlroute experiment's default --out is results/... relative to the working directory.
    assert PurePosixPath(results[0].split(":")[1]) == _workdir("emulation") / "results"


def test_the_mounted_configuration_is_where_the_image_reads_it():
    controller = _service("controller")
    target = _env("controller")["MLROUTE_CONFIG"]
    assert controller["environment"]["MLROUTE_CONFIG"] == target
    mounts = {v.split(":")[0]: v.split(":")[1:] for v in controller["volumes"]}
    assert mounts["./examples/mlroute.docker.yaml"][0] == target
    assert mounts["./examples/mlroute.docker.yaml"][1:] == ["ro"]


def test_every_file_the_compose_file_references_exists():
    for name, service in _compose()["services"].items():
        build = service["build"]
        assert (ROOT / build["context"]).is_dir()
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source == "./results":  # an output: created on the first run, ignored by git
                continue
            if source in _compose().get("volumes", {}):  # a named volume Docker makes (ZooKeeper's data)
                continue
            assert source.startswith("./"), f"{name}: mount {source} is not in the repository"
            assert (ROOT / source).exists(), f"{name}: mounts {source}, which does not exist"
        for key in ("entrypoint", "command"):
            for path in _relative_paths(_unescape_compose(service.get(key) or [])):
                assert (ROOT / path).exists(), f"{name}.{key} runs {path}, which does not exist"


def test_scripts_run_by_the_images_are_executable():
    for words in (_service("emulation")["entrypoint"], _exec_form("emulation", "ENTRYPOINT")):
        for path in _relative_paths(words):
            if path.startswith("scripts/"):
                assert os.access(ROOT / path, os.X_OK), f"{path} is run directly but is not executable"


def test_the_emulation_entrypoint_starts_open_vswitch_with_the_large_socket_buffer_first():
    entrypoint = _unescape_compose(_service("emulation")["entrypoint"])
    assert entrypoint == _exec_form("emulation", "ENTRYPOINT")
    assert entrypoint[:2] == ["sh", "-c"] and 'exec "$@"' in entrypoint[2]
    setup = (ROOT / "scripts" / "setup_env.sh").read_text()
    # scripts/setup_env.sh raises net.core.wmem_default before starting OVS (docs/platform.md) and, in the image, finds
    # the venv up to date: the image must leave the stamp it checks.
    assert setup.index("net.core.wmem_default=8388608") < setup.index("ovs-ctl start")
    stamp = re.search(r"^STAMP=(\S+)", setup, re.MULTILINE).group(1).replace("$VENV", ".venv")
    assert any(stamp in args for args in _instructions("emulation", "RUN"))


def test_the_image_installs_the_apt_packages_listed_in_setup_env():
    setup = (ROOT / "scripts" / "setup_env.sh").read_text()
    run = " ".join(_instructions("emulation", "RUN"))
    # The Dockerfile reads the list with this sed expression; it must still find it.
    sed = re.search(r"sed -n '(s/\^APT_PACKAGES=.*?)' scripts/setup_env\.sh", run)
    assert sed, "the emulation stage no longer reads APT_PACKAGES from scripts/setup_env.sh"
    packages = re.search(r'^APT_PACKAGES="(.*)"$', setup, re.MULTILINE).group(1).split()
    assert {"openvswitch-switch", "mininet", "iperf3", "ethtool"} <= set(packages)
    if shutil.which("sed"):
        out = subprocess.run(["sed", "-n", sed.group(1), "scripts/setup_env.sh"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out == packages


# ---------------------------------------------------------------------------------------------------- config


def test_mounted_config_loads_and_is_what_binds_rest_to_all_interfaces():
    cfg = mlconfig.load(str(DOCKER_CONFIG))
    assert cfg["rest"]["host"] == "0.0.0.0"
    assert cfg["rest"]["port"] == 8080  # the port docker-compose.yml publishes
    assert mlconfig.DEFAULTS["rest"]["host"] == "127.0.0.1"  # so without the mount REST stays in the container
    # ...and nothing else overrides it: no --wsapi-host in the image's instructions or the compose services.
    instructions = " ".join(args for _, _, args in _dockerfile())
    assert "--wsapi-host" not in instructions + json.dumps(_compose()["services"])
    assert "--rest-host" not in instructions + json.dumps(_compose()["services"])


# ---------------------------------------------------------------------------------------------------- commands


def test_the_controller_runs_mlroute_controller():
    command = ["mlroute", "controller"]
    assert _exec_form("controller", "CMD") == command
    assert _exec_form("controller", "ENTRYPOINT") is None
    assert _service("controller")["command"] == command
    assert "mlroute" in _console_scripts()
    from mlroute import cli

    args = cli.build_parser().parse_args(command[1:])
    assert args.command == "controller" and args._run is not None


def test_the_emulation_runs_a_registered_mlroute_experiment_with_valid_arguments():
    command = _service("emulation")["command"]
    assert command[0] in _console_scripts() and command[0] == "mlroute"
    assert command[1] == "experiment"
    if not EXPERIMENT_MODULE.exists():
        pytest.skip("mlroute/commands/experiment.py (mlroute experiment) is not in the repository yet")
    from mlroute import cli

    parser = cli.build_parser()
    args = parser.parse_args(command[1:])  # SystemExit (a test error) on an unknown flag or a bad value
    assert args.command == "experiment" and args._run is not None


def test_dockerfile_commands_and_copies_reference_real_paths():
    scripts = _console_scripts()
    for stage in _stages():
        workdir = _workdir(stage) if _instructions(stage, "WORKDIR") else None
        for instruction in ("ENTRYPOINT", "CMD"):
            words = _exec_form(stage, instruction)
            if not words:
                continue
            program = words[0]
            if "/" in program:
                assert (ROOT / program).exists(), f"{stage} {instruction}: {program} does not exist"
            else:
                assert program in scripts | SYSTEM_TOOLS, f"{stage} {instruction}: unknown program {program}"
            for path in _relative_paths(words):
                assert workdir is not None, f"{stage}: relative path {path} without a WORKDIR"
                assert (ROOT / path).exists(), f"{stage} {instruction}: {path} does not exist"
        for args in _instructions(stage, "COPY"):
            if args.startswith("--from"):
                continue
            for source in shlex.split(args)[:-1]:
                assert source == "." or (ROOT / source).exists(), f"{stage}: COPY {source}: no such file"


def test_the_controller_image_exposes_openflow_and_rest():
    exposed = {p for args in _instructions("controller", "EXPOSE") for p in args.split()}
    assert {"6653", "8080"} <= exposed


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_dockerfile_takes_python_dependencies_from_pyproject_only():
    project = _pyproject()["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    names = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in requirements]
    text = DOCKERFILE.read_text()
    for name in names:
        assert not re.search(rf"(?<![\w-]){re.escape(name)}\s*(==|>=|<=|~=|<|>)", text, re.IGNORECASE), \
            f"Dockerfile pins {name}: pyproject.toml is the single source"
    assert re.search(r"pip install[^\n]*-e \.", text)  # the project, with its pyproject.toml dependencies


def test_dockerignore_keeps_host_artifacts_out_of_the_build_context():
    entries = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".venv-*", ".git", "results"} <= entries  # the venvs have the host's absolute paths
    assert "**/__pycache__" in entries
    for needed in ("pyproject.toml", "controller", "mlroute", "mininet_topos", "scripts", "examples"):
        assert needed not in entries


# ---------------------------------------------------------------------------------------------------- docker


def _compose_command():
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for cmd in candidates:
        try:
            if subprocess.run(cmd + ["version"], capture_output=True, timeout=30).returncode == 0:
                return cmd
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def test_docker_compose_config_accepts_the_file():
    cmd = _compose_command()
    if cmd is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    env = {k: v for k, v in os.environ.items() if k not in ("BASE_IMAGE", "EXTRA_CA_CERT")}
    out = subprocess.run(cmd + ["-f", str(COMPOSE), "--profile", "emulation", "config"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)["services"]
    assert set(resolved) >= {"controller", "emulation"}
    assert Path(resolved["controller"]["build"]["context"]).resolve() == ROOT


def test_the_cluster_profile_runs_zookeeper_and_three_controllers_that_find_it():
    services = _compose()["services"]
    nodes = {name: s for name, s in services.items() if "cluster" in s.get("profiles", []) and name != "zookeeper"}
    assert len(nodes) == 3 and services["zookeeper"]["build"]["target"] == "zookeeper"
    ids, openflow = set(), set()
    for name, service in nodes.items():
        assert service["build"]["target"] == "controller" and "zookeeper" in service["depends_on"]
        source = next(v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == "/etc/mlroute/mlroute.yaml")
        cluster = mlconfig.load(str(ROOT / source))["cluster"]
        assert cluster["zookeeper"].split(":")[0] == "zookeeper" and cluster["node_id"] == name
        assert cluster["advertise"] == f"http://{name}:8080"
        ids.add(cluster["node_id"])
        openflow |= {p.split(":")[0] for p in service["ports"] if str(p).endswith(":6653")}
        assert all(str(p).startswith("127.0.0.1:") for p in service["ports"] if str(p).endswith(":8080"))
    assert len(ids) == 3 and len(openflow) == 3 and "6653" not in openflow  # beside the plain controller


def test_zookeepers_data_outlives_the_containers():
    """The cluster's generation is in ZooKeeper's dataDir; switches that stay up remember the largest generation
    they saw, so the data must survive ``down`` / ``up`` (a named volume), or every election starts below it."""
    zoo = dict(line.split("=", 1) for line in (ROOT / "deploy" / "zookeeper" / "zoo.cfg").read_text().splitlines()
               if line.strip() and not line.startswith("#"))
    mounts = {v.split(":")[1]: v.split(":")[0] for v in _service("zookeeper")["volumes"]}
    assert mounts[zoo["dataDir"]] in _compose()["volumes"]


def test_the_zookeeper_stage_starts_on_debians_package():
    """Found by running the cluster profile (docs/docker.md): Debian's zookeeper package links <dataDir>/myid to a
    placeholder text, on which ZooKeeper exits at once ("Invalid config"), and with no slf4j binding on the class
    path it logs nothing, not even that."""
    zoo = dict(line.split("=", 1) for line in (ROOT / "deploy" / "zookeeper" / "zoo.cfg").read_text().splitlines()
               if line.strip() and not line.startswith("#"))
    assert not any(key.startswith("server.") for key in zoo)  # standalone: no myid wanted
    assert any(f"rm -f {zoo['dataDir'].rstrip('/')}/myid" in run for run in _instructions("zookeeper", "RUN"))
    command = _exec_form("zookeeper", "CMD")
    classpath = re.search(r"-cp (\S+)", command[-1]).group(1).split(":")
    assert "/etc/zookeeper/conf/zoo.cfg" in command[-1] and "/usr/share/java/zookeeper.jar" in classpath
    assert any(re.search(r"/slf4j-(simple|log4j12|jdk14)\.jar$", entry) for entry in classpath)
