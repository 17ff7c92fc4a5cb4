#!/usr/bin/env bash
# The demo command: set-up (idempotent), then the controller end to end on an emulated fat-tree (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_env.sh
exec .venv/bin/python scripts/demo.py "$@"
