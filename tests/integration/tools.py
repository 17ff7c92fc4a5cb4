"""Small helpers of the integration tests that run third-party programs (chromium, prometheus)."""

import os
import shutil
import subprocess

import pytest


def required_binary(name: str) -> str:
    """The path of ``name``; skips the test when it is missing, or fails under MLROUTE_REQUIRE_INTEGRATION=1
    (CI, where scripts/setup_env.sh installed it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (scripts/setup_env.sh installs it)"
        if os.environ.get("MLROUTE_REQUIRE_INTEGRATION") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def terminate(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``: the process is gone when this returns."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
