# mlroute in Docker (docs/docker.md). Stages:
#   deps        Debian 12 + its Python 3.11, /opt/mlroute/.venv with the OpenFlow framework (build argument FRAMEWORK:
#               ryu, the default, with its Python 3.11 fix, python -m controller.southbound.platform_fixes; or
#               os-ken) and every
#               dependency of pyproject.toml: the layout scripts/setup_env.sh makes
#   emulation   deps + the apt packages of scripts/setup_env.sh (Open vSwitch, Mininet's mnexec, iperf3, ethtool)
#               + the project: the docker-compose `emulation` service (privileged, host network)
#   prometheus  Debian's prometheus with deploy/prometheus/prometheus.yml: the docker-compose `monitoring` profile
#   zookeeper   Debian's zookeeper with deploy/zookeeper/zoo.cfg: the docker-compose `cluster` profile
#   controller  deps + the project, MLROUTE_CONFIG, `mlroute controller`; the default (last) target,
#               so a plain `docker build -t mlroute .` gives the controller
#
# Dependency versions live in pyproject.toml only (the single source); nothing here pins a Python package.
# Dependencies and apt packages sit in layers below the project's files, so a code change rebuilds seconds of work.
# No image registry is reachable from the project's machines: BASE_IMAGE is then a local image, e.g. one made with
# `debootstrap bookworm` + `docker import` (docs/docker.md). RUN steps need the Debian mirror and PyPI: on a
# daemon without a bridge network, build with `--network host` (docker-compose.yml does).
ARG BASE_IMAGE=debian:bookworm

FROM ${BASE_IMAGE} AS deps
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mlroute
# Rebuilt only when pyproject.toml changes. As in setup_env.sh: ryu 4.34's sdist build needs
# setuptools<68 in its isolated build environment, hence the constraint. EXTRA_CA_CERT (optional, PEM text) is a
# CA trusted by pip for this step only, for networks that reach PyPI through a TLS-intercepting proxy (pip uses
# its own CA bundle, not the system's); it is not added to the image's trust store.
COPY pyproject.toml README.md ./
COPY controller/__init__.py controller/
COPY controller/southbound/__init__.py controller/southbound/platform_fixes.py controller/southbound/
COPY mlroute/__init__.py mlroute/errors.py mlroute/
COPY mininet_topos/__init__.py mininet_topos/
ARG EXTRA_CA_CERT=""
ARG FRAMEWORK=ryu
RUN /usr/bin/python3 -m venv .venv \
 && if [ -n "$EXTRA_CA_CERT" ]; then \
      cat /etc/ssl/certs/ca-certificates.crt > /tmp/build-ca.pem \
      && printf '%s\n' "$EXTRA_CA_CERT" >> /tmp/build-ca.pem && export PIP_CERT=/tmp/build-ca.pem; fi \
 && echo "setuptools<68" > /tmp/build-constraints.txt \
 && .venv/bin/python -m pip install -q --upgrade "pip<25" "setuptools<68" wheel \
 && PIP_CONSTRAINT=/tmp/build-constraints.txt .venv/bin/python -m pip install -q -e ".[all,$FRAMEWORK]" \
 && rm -f /tmp/build-constraints.txt /tmp/build-ca.pem \
 && if [ "$FRAMEWORK" = ryu ]; then .venv/bin/python -m controller.southbound.platform_fixes \
      && .venv/bin/python -W ignore -c "import ryu.app.wsgi, ryu.cmd.manager"; \
    else .venv/bin/python -c "import os_ken.base.app_manager"; fi \
 && printf '%s' "${FRAMEWORK#ryu}" > .venv/.mlroute-framework
ENV PATH=/opt/mlroute/.venv/bin:$PATH

FROM deps AS emulation
# The apt packages of the bare-metal set-up, read from scripts/setup_env.sh so the two lists cannot drift; kmod for
# the module probes of ovs-ctl and Mininet. At run time scripts/setup_env.sh (the entrypoint) finds everything
# installed and only raises net.core.wmem_default, then starts Open vSwitch.
COPY scripts/setup_env.sh scripts/setup_env.sh
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends kmod \
      $(sed -n 's/^APT_PACKAGES="\(.*\)"$/\1/p' scripts/setup_env.sh) >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && for c in ovs-vswitchd ovs-vsctl mnexec iperf3 ethtool ping; do command -v $c >/dev/null; done
# The project (editable install again: no dependency changes, no network, the venv's setuptools<68 builds it).
# The stamp tells setup_env.sh that the venv is up to date with pyproject.toml.
COPY . .
RUN .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . \
 && if [ ! -s .venv/.mlroute-framework ]; then .venv/bin/python -m controller.southbound.platform_fixes; fi \
 && .venv/bin/mlroute controller --help >/dev/null \
 && cp .venv/.mlroute-framework .venv/.mlroute-installed
# Needs --privileged and the host network (it writes a sysctl; Mininet makes namespaces, veths, qdiscs).
ENTRYPOINT ["sh", "-c", "scripts/setup_env.sh >&2 && exec \"$@\"", "mlroute-emulation"]
CMD ["mlroute", "experiment", "--help"]

FROM ${BASE_IMAGE} AS prometheus
# Debian's Prometheus scraping the controller (docker-compose profile `monitoring`, docs/monitoring.md); the
# configuration is the repository's deploy/prometheus/prometheus.yml (compose also mounts it, so edits need no rebuild).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY deploy/prometheus/prometheus.yml /etc/prometheus/prometheus.yml
USER prometheus
EXPOSE 9090
CMD ["sh", "-c", "exec prometheus --config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/var/lib/prometheus/metrics2 --web.listen-address=:9090"]

FROM ${BASE_IMAGE} AS zookeeper
# Debian's ZooKeeper 3.8 for the docker-compose `cluster` profile (README "Controller cluster"), run in the
# foreground with deploy/zookeeper/zoo.cfg (one standalone server). Debian ships /var/lib/zookeeper/myid as a link
# to a placeholder text ("replace this text with ..."), and ZooKeeper refuses to start on it ("Invalid config,
# exiting abnormally": serverid ... is not a number); a standalone server needs no myid, so it goes. slf4j-simple on
# the class path sends ZooKeeper's log to stderr (docker logs); without a binding it logs nothing at all.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /var/lib/zookeeper && chown zookeeper /var/lib/zookeeper \
 && rm -f /var/lib/zookeeper/myid && test -f /usr/share/java/slf4j-simple.jar
COPY deploy/zookeeper/zoo.cfg /etc/zookeeper/conf/zoo.cfg
USER zookeeper
EXPOSE 2181
CMD ["sh", "-c", "exec java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar org.apache.zookeeper.server.quorum.QuorumPeerMain /etc/zookeeper/conf/zoo.cfg"]

FROM deps AS controller
COPY . .
RUN .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . \
 && if [ ! -s .venv/.mlroute-framework ]; then .venv/bin/python -m controller.southbound.platform_fixes; fi \
 && .venv/bin/mlroute controller --help >/dev/null \
 && cp .venv/.mlroute-framework .venv/.mlroute-installed
# The configuration is mounted here (docker-compose.yml mounts examples/mlroute.docker.yaml read-only); with
# nothing mounted the controller refuses to start and names this path.
ENV MLROUTE_CONFIG=/etc/mlroute/mlroute.yaml
# OpenFlow (the framework also listens on 6633) and REST. REST binds to rest.host of the mounted configuration: 127.0.0.1
# by default, i.e. unreachable from outside the container; examples/mlroute.docker.yaml sets 0.0.0.0. Nothing
# here passes --rest-host, so the configuration file is the only switch. `mlroute controller` runs the app under
# the framework the image was built with (no checkout layout needed; `ryu-manager controller/app.py` works too).
EXPOSE 6653 8080
CMD ["mlroute", "controller"]
