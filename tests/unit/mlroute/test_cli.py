import subprocess
import sys

from mlroute import cli


def test_help_lists_every_sub_command(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for name in ("route", "simulate", "reproduce", "experiment"):
        assert name in out


def test_usage_errors_exit_2_with_one_line_also_under_python_m(tmp_path):
    in_code = "import sys; from mlroute.cli import main; sys.exit(main())"
    for argv in ([sys.executable, "-m", "mlroute.cli"], [sys.executable, "-c", in_code]):
        proc = subprocess.run(argv + ["route", "--fabric", "clos", "--tors", "2", "--spines", "2",
                                      "--hosts-per-tor", "2", "--traffic", str(tmp_path / "missing.txt")],
                              capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and "missing.txt" in proc.stderr
