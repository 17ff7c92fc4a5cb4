#!/usr/bin/env bash
# The test command: set-up (idempotent) of both frameworks' venvs (.venv with Ryu 4.34, .venv-osken with os-ken
# 4.x), the lint and type gates, the unit tests of everything that runs on the framework under os-ken (the
# controller, the CLI, the deployment; the mlroute library never imports a framework, so its tests run once),
# then the whole suite under Ryu — unit tests, then
# the integration tests that run the real controller, Open vSwitch and Mininet (needs root); their os-ken subset
# (tests/integration/test_os_ken.py, test_rest_bad_input.py, test_installed_wheel.py) runs the controller from
# .venv-osken. Extra arguments go to the final pytest (and skip the os-ken unit run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_env.sh
MLROUTE_FRAMEWORK=os-ken MLROUTE_VENV=.venv-osken scripts/setup_env.sh
export MLROUTE_REQUIRE_INTEGRATION=1  # a missing OVS/Mininet is a failure here, not a skip
.venv/bin/ruff check .  # the lint gate (settings in pyproject.toml)
.venv/bin/mypy          # the type gate over the controller's decision core (pyproject.toml [tool.mypy])
if [ $# -eq 0 ]; then
  echo "[test] unit tests under os-ken"
  # (the kill-at-every-step recovery tests exercise the framework-free core through the app bench, which the
  # other app tests here already cover under os-ken: they run once, under Ryu, for the suite's time)
  .venv-osken/bin/python -m pytest -q -p no:cacheprovider tests/unit/controller tests/unit/test_*.py \
    tests/unit/mlroute/test_cli.py tests/unit/mininet_topos --ignore=tests/unit/controller/test_recovery_kills.py
fi
exec .venv/bin/python -m pytest -v -p no:cacheprovider --durations=25 "${@:-tests}"  # (the slowest 25 listed)
