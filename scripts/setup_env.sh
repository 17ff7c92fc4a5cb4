#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root): apt packages, the .venv with Ryu 4.34 and its
# Python 3.11 fixes, the project in editable mode, and Open vSwitch started with the buffer it needs.
# A second run checks each step and changes nothing.
#   MLROUTE_FRAMEWORK=os-ken   os-ken 4.x instead of Ryu in that venv (no fixes needed; Ryu removed if there)
#   MLROUTE_VENV=DIR           the venv to set up (default .venv); scripts/test.sh makes .venv-osken this way
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
FRAMEWORK=${MLROUTE_FRAMEWORK:-ryu}
VENV=${MLROUTE_VENV:-.venv}
case "$FRAMEWORK" in
  ryu) OTHER=os-ken ;;
  os-ken|os_ken) FRAMEWORK=os-ken; OTHER=ryu ;;
  *) echo "[setup] MLROUTE_FRAMEWORK=$FRAMEWORK: expected ryu or os-ken" >&2; exit 2 ;;
esac

APT_PACKAGES="openvswitch-switch mininet iperf3 iputils-ping ethtool iproute2 procps psmisc python3-venv python3-dev curl prometheus chromium zookeeper python3-torch"
missing=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "[setup] apt install:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi

# A plain venv (no system or user site-packages leaking in); Mininet comes from PyPI, its mnexec from apt.
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
# The stamp holds the framework installed (empty: ryu, as the Dockerfile leaves it).
STAMP=$VENV/.mlroute-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ "$(cat "$STAMP")" != "${FRAMEWORK/#ryu/}" ]; then
  echo "[setup] pip install ($FRAMEWORK + project, editable) into $VENV"
  # ryu 4.34's sdist build needs setuptools<68 in its isolated build environment.
  CONSTRAINTS=$(mktemp)
  echo "setuptools<68" > "$CONSTRAINTS"
  "$VENV/bin/python" -m pip install -q --upgrade "pip<25" "setuptools<68" wheel
  if "$VENV/bin/python" -m pip show -q "$OTHER" >/dev/null 2>&1; then
    echo "[setup] removing $OTHER from $VENV (one framework per venv)"
    "$VENV/bin/python" -m pip uninstall -q -y "$OTHER"
  fi
  PIP_CONSTRAINT="$CONSTRAINTS" "$VENV/bin/python" -m pip install -q -e ".[test,$FRAMEWORK]"
  rm -f "$CONSTRAINTS"
  printf '%s' "${FRAMEWORK/#ryu/}" > "$STAMP"
fi
if [ "$FRAMEWORK" = ryu ]; then
  "$VENV/bin/python" -m controller.southbound.platform_fixes
fi
# the routing core's numba kernels compiled into their on-disk cache now (2-4 s once), not by the first controller
"$VENV/bin/python" -c 'from mlroute.routing import kernels; kernels.warm()'

# OVS sends on all ports through one AF_PACKET socket sized by wmem_default *when it starts*: raise it first.
if [ "$(sysctl -n net.core.wmem_default)" -lt 8388608 ]; then
  sysctl -qw net.core.wmem_default=8388608
  if /usr/share/openvswitch/scripts/ovs-ctl status >/dev/null 2>&1; then
    echo "[setup] restarting Open vSwitch to pick up the larger socket buffer"
    /usr/share/openvswitch/scripts/ovs-ctl stop >/dev/null
  fi
fi
if ! /usr/share/openvswitch/scripts/ovs-ctl status >/dev/null 2>&1; then
  echo "[setup] starting Open vSwitch"
  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null
fi
echo "[setup] ready: $ROOT/$VENV ($FRAMEWORK: $([ "$FRAMEWORK" = ryu ] && echo "ryu-manager, ")mlroute controller), Open vSwitch $(ovs-vsctl --version | head -1 | awk '{print $NF}')"
