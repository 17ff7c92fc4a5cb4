#!/usr/bin/env bash
# The test command: set-up (idempotent), the lint and type gates, then the whole suite — unit tests, then the
# integration tests that run the real ryu-manager, Open vSwitch and Mininet (needs root). Extra arguments go to
# pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_env.sh
export MLROUTE_REQUIRE_INTEGRATION=1  # a missing OVS/Mininet is a failure here, not a skip
.venv/bin/ruff check .  # the lint gate (settings in pyproject.toml)
.venv/bin/mypy          # the type gate over the controller's decision core (pyproject.toml [tool.mypy])
exec .venv/bin/python -m pytest -v -p no:cacheprovider "${@:-tests}"
