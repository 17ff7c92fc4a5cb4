"""scripts/soak.py: a run's tests sorted into passed, failed and timed out from pytest's own JUnit report, and a
whole soak's verdict (exit status 0 only when every run passed)."""

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("soak", ROOT / "scripts" / "soak.py")
soak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(soak)


def test_a_soak_counts_passed_failed_and_timed_out_runs_and_names_them(tmp_path, capsys):
    flag = tmp_path / "second-run"
    module = tmp_path / "test_sometimes.py"
    module.write_text(textwrap.dedent(f"""
        import time
        from pathlib import Path

        import pytest

        def test_passes():
            pass

        def test_fails_on_the_second_run():
            flag = Path({str(flag)!r})
            first = not flag.exists()
            flag.touch()
            assert first

        @pytest.mark.timeout(1)
        def test_hangs_on_the_third_run():
            if Path({str(flag)!r} + "3").exists():
                time.sleep(60)
            if Path({str(flag)!r}).exists() and not Path({str(flag)!r} + "2").exists():
                Path({str(flag)!r} + "2").touch()
            elif Path({str(flag)!r} + "2").exists():
                Path({str(flag)!r} + "3").touch()
    """))
    status = soak.main([str(module), "--runs", "4", "--python", sys.executable,
                        "--pytest-arg=-c", f"--pytest-arg={ROOT / 'pyproject.toml'}",
                        f"--pytest-arg=--rootdir={tmp_path}"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "4 runs: 1 passed, 1 failed, 2 timed out" in out, out
    assert "3x failed: test_sometimes::test_fails_on_the_second_run" in out, out
    assert "2x timed out: test_sometimes::test_hangs_on_the_third_run" in out, out
