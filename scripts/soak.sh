#!/usr/bin/env bash
# Run test modules N times in a row; prints how many runs passed, failed and timed out (scripts/soak.py).
#   scripts/soak.sh MODULE... --runs N [--beside-unit]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/soak.py "$@"
