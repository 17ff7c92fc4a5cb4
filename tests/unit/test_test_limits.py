"""The suite's per-test limit (pyproject.toml [tool.pytest.ini_options] timeout, pytest-timeout's signal method):
a test past its limit fails with every thread's stack dumped, and the run goes on to the next test. Run in an
inner pytest with the project's own configuration."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_test_past_its_limit_fails_with_a_stack_dump_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent("""
        import subprocess
        import sys
        import threading
        import time

        import pytest

        @pytest.mark.timeout(2)
        def test_sleeps_past_its_limit():
            done = threading.Event()
            threading.Thread(target=done.wait, name="stuck-helper", daemon=True).start()
            try:
                time.sleep(120)
            finally:
                done.set()

        @pytest.mark.timeout(2)
        def test_reads_a_silent_child_for_ever():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                     stdout=subprocess.PIPE)
            try:
                child.stdout.readline()
            finally:
                child.kill()
                child.wait()

        def test_after_them_still_runs():
            assert True
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                          str(tmp_path), "-p", "no:cacheprovider", "-v", str(tmp_path / "test_hangs.py")],
                         capture_output=True, text=True, timeout=100, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert "test_after_them_still_runs PASSED" in out, out
    assert out.count("Failed: Timeout (>2.0s)") >= 2, out
    assert ">           time.sleep(120)" in out and ">           child.stdout.readline()" in out, out  # where
    assert "Stack of stuck-helper" in out, out  # and every other thread's stack
