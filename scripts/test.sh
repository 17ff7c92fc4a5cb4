#!/usr/bin/env bash
# The test command: set-up (idempotent) of both frameworks' venvs (.venv with Ryu 4.34, .venv-osken with os-ken
# 4.x), the lint and type gates, the unit suite under os-ken, then the whole suite under Ryu — unit tests, then
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
  echo "[test] unit suite under os-ken"
  .venv-osken/bin/python -m pytest -q -p no:cacheprovider tests/unit
fi
exec .venv/bin/python -m pytest -v -p no:cacheprovider "${@:-tests}"
